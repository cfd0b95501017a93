"""Background work for generation: one task per run."""
from __future__ import annotations

from celery import shared_task

from generation import documents


@shared_task(acks_late=True, reject_on_worker_lost=True)
def generate_document(run_id: int) -> None:
    """Execute a pending generation run; safe to run twice (the run is claimed once)."""
    documents.generation_run_execute(run_id=run_id)
