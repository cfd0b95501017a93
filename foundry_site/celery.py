"""Celery app. With no FOUNDRY_BROKER_URL every task runs eagerly, in-process."""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "foundry_site.settings")

app = Celery("foundry_site")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
