from __future__ import annotations

from django.apps import AppConfig


class GenerationConfig(AppConfig):
    name = "generation"
