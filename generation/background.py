"""Generation runs in the background of the web process, when no broker is configured.

With a broker, ``generation_start`` sends the run to Celery and this module is not used.
Without one, the generate page and ``POST /api/v1/generate`` return at once and the run
executes on a small pool of worker threads in the same process (``FOUNDRY_RUN_THREADS`` per
web process, default 1; runs beyond that wait, still ``pending``, in the order they came).

Nothing is lost silently: a run is a row before it reaches the pool, every step records its
stage and a heartbeat, and a run whose process stopped (a restart, a crash) stays ``pending`` or
``running`` with an old heartbeat until the stale-run sweeper (``foundry jobs sweep``) runs it
again or fails it with the reason (``core/jobs.py``).
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future, ThreadPoolExecutor

from django.conf import settings
from django.db import connections

from generation import pipeline

logger = logging.getLogger(__name__)

_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None


def run_submit(run_id: int) -> Future:
    """Queue the run on this process's worker threads; returns at once."""
    return _executor().submit(_run_in_thread, run_id)


def run_execute(run_id: int) -> None:
    """Execute the run here. A failure is recorded on the run by the pipeline; it is logged, not raised."""
    try:
        pipeline.generation_run_execute(run_id=run_id)
    except Exception:
        logger.exception("generation run %s failed", run_id)


def _run_in_thread(run_id: int) -> None:
    try:
        run_execute(run_id)
    finally:
        connections.close_all()  # this worker thread's own database connection


def _executor() -> ThreadPoolExecutor:
    # Created on first use, so each web worker process (forked by gunicorn) has its own threads.
    global _pool
    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=settings.FOUNDRY_RUN_THREADS, thread_name_prefix="foundry-run")
        return _pool
