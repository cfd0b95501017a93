"""The real Celery app for broker tests, with deliberate faults for poison-task tests.

Workers started by ``tests/broker.py`` use ``-A tests.broker_worker_app``.
Everything is the production app; only two steps are wrapped, and only for
inputs whose name says so:

- ingest, files named ``poison-raise*``: the extractor raises an unexpected RuntimeError;
- ingest, files named ``poison-crash*``: the extractor kills its worker process (as a segfault would);
- generation, a spec that says ``poison-model``: the run asks for a model that does not exist
  (a permanent model error, as a misspelt model name would give);
- generation, a spec that says ``poison-crash``: the model step kills its worker process;
- ingest, files named ``slow-*``, and generation, a spec that says ``slow-compute``: the step
  notes its start in ``$FOUNDRY_HOME/starts.log`` (one line per start, for counting redone
  work) and takes ``FOUNDRY_TEST_SLOW_SECONDS`` longer, as a large file or a long model call does.

(The generation marker sits in the spec, which reaches the prompt, not in the
topic, which would change what retrieval finds.)
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from celery.signals import worker_process_init

from foundry_site.celery import app

__all__ = ["app"]


def _slow_step(name: str) -> None:
    with (Path(os.environ["FOUNDRY_HOME"]) / "starts.log").open("a") as log:
        log.write(f"{name}\n")
    time.sleep(float(os.environ.get("FOUNDRY_TEST_SLOW_SECONDS", "5")))


@worker_process_init.connect
def _break_extractor_for_poison_files(**kwargs: Any) -> None:
    from sources.services import prepare

    real_extract = prepare.extract

    def extract(path: Path, data: bytes) -> Any:
        if path.name.startswith("poison-raise"):
            raise RuntimeError("extractor crashed on purpose")
        if path.name.startswith("poison-crash"):
            os._exit(1)
        if path.name.startswith("slow-"):
            _slow_step(path.name)
        return real_extract(path, data)

    prepare.extract = extract


@worker_process_init.connect
def _break_generation_for_poison_topics(**kwargs: Any) -> None:
    from generation import compute

    real_compute = compute.generation_run_compute

    def generation_run_compute(*, payload: dict[str, Any], **rest: Any) -> dict[str, Any]:
        spec = str(payload.get("system") or payload.get("sections"))  # a model's prompt, or the extractive outline
        if "poison-model" in spec:
            payload = {**payload, "model": "local/no-such-model"}
        if "poison-crash" in spec:
            os._exit(1)
        if "slow-compute" in spec:
            if rest.get("progress"):
                rest["progress"]("generate")  # as the model step reports itself before its call
            _slow_step(f"run-{payload['run_id']}")
        return real_compute(payload=payload, **rest)

    compute.generation_run_compute = generation_run_compute
