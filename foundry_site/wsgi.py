from __future__ import annotations

import os

from django.core.wsgi import get_wsgi_application
from django.urls import get_resolver

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "foundry_site.settings")
application = get_wsgi_application()
# Every page and API, with the libraries under them, is imported here, once (`foundry serve` preloads
# this module in gunicorn's master), not on the first request each worker serves.
url_patterns = get_resolver().url_patterns
import foundry_site.mcp.http  # noqa: E402,F401  (imported by /mcp on its first request: foundry_site/urls.py)
