"""gunicorn hooks for ``foundry serve`` (``--config python:foundry_site.gunicorn_conf``); the settings are
on its command line (``foundry_site.cli.serve.serve_argv``)."""

from __future__ import annotations

import threading
import time
from typing import Any


def post_worker_init(worker: Any) -> None:
    """Load a local embedding model in the background as the worker starts (about 7 s here), so the first
    question the worker serves does not wait for it; one asked sooner waits on that same load. Loaded after
    the fork, not in the master: torch's thread pools do not survive a fork."""
    from django.conf import settings

    model = settings.FOUNDRY.embedding.model
    if model.startswith("local/"):
        threading.Thread(target=_warm, args=(worker, model), name="warm-up", daemon=True).start()


def _warm(worker: Any, model: str) -> None:
    from core import llm

    start = time.perf_counter()
    try:
        llm.embed(["warm-up"], model=model)
    except llm.LLMError as exc:  # the first question reports it as usual
        worker.log.warning("worker %s could not load the embedding model %s: %s", worker.pid, model, exc)
        return
    worker.log.info("worker %s loaded the embedding model %s in %.1f s", worker.pid, model, time.perf_counter() - start)
