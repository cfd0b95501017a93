"""``foundry`` console script: the same as ``python manage.py foundry …``."""
from __future__ import annotations

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "foundry_site.settings")
    from django.core.management import ManagementUtility

    ManagementUtility(["foundry", "foundry", *sys.argv[1:]]).execute()
