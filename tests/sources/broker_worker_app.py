"""The real Celery app for broker tests, with one deliberate fault for poison-task tests.

Workers started by ``test_tasks_broker`` use ``-A tests.sources.broker_worker_app``.
Everything is the production app; only the extractor is wrapped, and only for
files whose name says so:

- ``poison-raise*``: the extractor raises an unexpected RuntimeError;
- ``poison-crash*``: the extractor kills its worker process (as a segfault would).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from celery.signals import worker_process_init

from foundry_site.celery import app

__all__ = ["app"]


@worker_process_init.connect
def _break_extractor_for_poison_files(**kwargs: Any) -> None:
    from sources.services import ingest

    real_extract = ingest.extract

    def extract(path: Path, data: bytes) -> Any:
        if path.name.startswith("poison-raise"):
            raise RuntimeError("extractor crashed on purpose")
        if path.name.startswith("poison-crash"):
            os._exit(1)
        return real_extract(path, data)

    ingest.extract = extract
