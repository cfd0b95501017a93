"""``foundry`` console script: the same as ``python manage.py foundry …``."""

from __future__ import annotations

import os
import sys


def settings_or_exit() -> None:
    """Load the settings (and with them foundry.yaml); on a configuration error print it and exit 2.

    The error names the file, each bad key, its value and what is allowed; the
    traceback of the settings import around it would only hide that.
    """
    from django.conf import settings
    from django.core.exceptions import ImproperlyConfigured

    try:
        settings.INSTALLED_APPS  # noqa: B018  (importing the settings reads foundry.yaml)
    except ImproperlyConfigured as exc:
        sys.stderr.write(f"foundry: configuration error: {exc}\n")
        raise SystemExit(2) from None


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "foundry_site.settings")
    settings_or_exit()
    from django.core.management import ManagementUtility

    ManagementUtility(["foundry", "foundry", *sys.argv[1:]]).execute()
