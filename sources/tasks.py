"""Background work for ingest. Tasks take ids and paths, call one service, and hold no logic.

Queues (see docs/operations.md): ``prepare_source`` runs on ``compute`` and never
opens the database; everything else runs on ``db``, next to the SQLite file.
The services enqueue the registered tasks by name (``core.jobs.registered_task``).
"""

from __future__ import annotations

from typing import Any

from celery import shared_task

from core.jobs import (
    FoundryTask,
    Heartbeat,
    heartbeat_interval,
    is_eager,
    register_task,
    retry_transient,
    task_failure_reason,
)
from sources.services import ingest_jobs
from sources.services.sync import collections_sync


@register_task("ingest.run")
@shared_task(base=FoundryTask)
@retry_transient
def run_ingest_job(job_id: int) -> None:
    """Claim a pending ingest job and send its files out. Safe to run twice: a claimed job is left alone."""
    ingest_jobs.ingest_job_run(job_id=job_id)


# The payload is handed to store_source through the chain message; keeping it in
# the result store as well would only fill Redis with vectors.
@register_task("ingest.prepare")
@shared_task(base=FoundryTask, ignore_result=True)
@retry_transient
def prepare_source(root: str, rel: str, job_id: int | None = None) -> dict[str, Any]:
    """Extract, chunk, enrich and embed one file; return the JSON payload. Pure: no database.

    For a job, a heartbeat naming the file goes to the db queue (``ingest_job_progress``) every
    ``FOUNDRY_HEARTBEAT_SECONDS`` while the file is prepared, however long that takes: the sweeper
    sends just this file again when its beats stop while the job goes on.
    """
    if job_id is None or is_eager():
        return ingest_jobs.ingest_job_file_prepare(root=root, rel=rel, job_id=job_id)
    with Heartbeat(lambda stage: ingest_job_progress.delay(job_id, rel), every=heartbeat_interval()) as beat:
        beat("prepare")
        return ingest_jobs.ingest_job_file_prepare(root=root, rel=rel, job_id=job_id)


@shared_task(base=FoundryTask, ignore_result=True)
@retry_transient
def ingest_job_progress(job_id: int, rel: str | None = None) -> None:
    """A compute worker's heartbeat for a running job and the file ``rel`` it prepares (none: a beat from a
    release before per-file beats, still queued). Late or duplicate beats change nothing."""
    ingest_jobs.ingest_job_beat(job_id=job_id, rel=rel)


@register_task("ingest.store")
@shared_task(base=FoundryTask, ignore_result=True)
@retry_transient
def store_source(payload: dict[str, Any], job_id: int, rel: str) -> None:
    """Write one prepared file and record its result. Safe to run twice: a recorded file is left alone."""
    ingest_jobs.ingest_job_file_store(job_id=job_id, rel=rel, payload=payload)


@register_task("ingest.file_failed")
@shared_task(base=FoundryTask, ignore_result=True)
@retry_transient
def ingest_file_failed(task_id: str, job_id: int, rel: str) -> None:
    """Errback of prepare/store: record the file as failed with the reason the failed task stored."""
    ingest_jobs.ingest_job_file_fail(job_id=job_id, rel=rel, reason=task_failure_reason(task_id))


# Scheduled by Celery beat every sync.interval (foundry.yaml; the "sync-bound-folders" entry in settings).
@shared_task(base=FoundryTask, ignore_result=True, name="sources.tasks.sync_bound_folders")
@retry_transient
def sync_bound_folders() -> list[dict[str, Any]]:
    """Queue an ingest job for every folder bound to a collection. Safe to run twice: a folder with an
    unfinished job is left to it."""
    return [r.as_dict() for r in collections_sync(wait=False)]
