"""Background work for generation. Tasks take ids and JSON payloads, call one service, and hold no logic.

Queues (see docs/operations.md, "Topology"): ``generate_compute`` runs on ``compute`` and never
opens the database; everything else runs on ``db``, next to the SQLite file.
The pipeline enqueues the registered tasks by name (``core.jobs.registered_task``).
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
    task_failure_error,
)
from generation import compute, pipeline


@shared_task(base=FoundryTask, ignore_result=True)
@retry_transient
def generate_document(run_id: int) -> None:
    """Claim a pending run, retrieve, and send the model work out. Safe to run twice: the run is claimed once."""
    pipeline.generation_run_execute(run_id=run_id)


# The result reaches generate_store through the chain message; keeping the
# document in the result store as well would only fill Redis.
@register_task("generation.compute")
@shared_task(base=FoundryTask, ignore_result=True)
@retry_transient
def generate_compute(payload: dict[str, Any]) -> dict[str, Any]:
    """The model call, grounding and footnotes for one run, from the payload alone. Pure: no database.

    The stages it reaches are sent to the db queue as ``generate_progress`` messages,
    repeated as a heartbeat while a stage lasts (a long model call).
    """
    if is_eager():  # in-process (no broker) the caller records progress; a message would run here, on the database
        return compute.generation_run_compute(payload=payload)
    run_id, attempt = payload["run_id"], payload["attempt"]
    with Heartbeat(lambda stage: generate_progress.delay(run_id, attempt, stage), every=heartbeat_interval()) as beat:
        return compute.generation_run_compute(payload=payload, progress=beat)


@shared_task(base=FoundryTask, ignore_result=True)
@retry_transient
def generate_progress(run_id: int, attempt: int, stage: str) -> None:
    """Record the stage a compute worker reached. Late or duplicate reports change nothing."""
    pipeline.generation_run_progress(run_id=run_id, attempt=attempt, stage=stage)


@register_task("generation.store")
@shared_task(base=FoundryTask, ignore_result=True)
@retry_transient
def generate_store(result: dict[str, Any]) -> None:
    """Write the document and finish the run. Safe to run twice: a finished run is left alone."""
    pipeline.generation_run_store(result=result)


@register_task("generation.failed")
@shared_task(base=FoundryTask, ignore_result=True)
@retry_transient
def generate_failed(task_id: str, run_id: int) -> None:
    """Errback of compute/store: fail the run with the reason the failed task stored."""
    pipeline.generation_run_fail(run_id=run_id, error=task_failure_error(task_id))
