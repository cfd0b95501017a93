from __future__ import annotations

from django.apps import AppConfig


class FoundrySiteConfig(AppConfig):
    name = "foundry_site"
    verbose_name = "Foundry"

    def ready(self) -> None:
        from foundry_site.db import checks  # noqa: F401  (registers the check)
