from __future__ import annotations

from django.apps import AppConfig


class SpecsConfig(AppConfig):
    name = "specs"
