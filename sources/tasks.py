"""Background work for ingest: one task per source file."""
from __future__ import annotations

from dataclasses import asdict

from celery import shared_task

from sources.services import ingest


@shared_task(acks_late=True, reject_on_worker_lost=True)
def ingest_source(root: str, rel: str, collection_id: int) -> dict:
    """Ingest one file and return its FileResult as a dict. Safe to run twice."""
    return asdict(ingest.source_ingest(root=root, rel=rel, collection_id=collection_id))
