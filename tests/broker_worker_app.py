"""The real Celery app for broker tests, with deliberate faults for poison-task tests.

Workers started by ``tests/broker.py`` use ``-A tests.broker_worker_app``.
Everything is the production app; only two steps are wrapped, and only for
inputs whose name says so:

- ingest, files named ``poison-raise*``: the extractor raises an unexpected RuntimeError;
- ingest, files named ``poison-crash*``: the extractor kills its worker process (as a segfault would);
- generation, a spec that says ``poison-model``: the run asks for a model that does not exist
  (a permanent model error, as a misspelt model name would give);
- generation, a spec that says ``poison-crash``: the model step kills its worker process.

(The generation marker sits in the spec, which reaches the prompt, not in the
topic, which would change what retrieval finds.)
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
    from sources.services import prepare

    real_extract = prepare.extract

    def extract(path: Path, data: bytes) -> Any:
        if path.name.startswith("poison-raise"):
            raise RuntimeError("extractor crashed on purpose")
        if path.name.startswith("poison-crash"):
            os._exit(1)
        return real_extract(path, data)

    prepare.extract = extract


@worker_process_init.connect
def _break_generation_for_poison_topics(**kwargs: Any) -> None:
    from generation import compute

    real_compute = compute.generation_run_compute

    def generation_run_compute(*, payload: dict[str, Any], **rest: Any) -> dict[str, Any]:
        if "poison-model" in payload["system"]:
            payload = {**payload, "model": "local/no-such-model"}
        if "poison-crash" in payload["system"]:
            os._exit(1)
        return real_compute(payload=payload, **rest)

    compute.generation_run_compute = generation_run_compute
