from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from django.apps import AppConfig

if TYPE_CHECKING:
    from core.jobs import SweepAction


def _requeue_ingest_job(job_id: int) -> None:
    from sources.services.ingest_jobs import ingest_job_enqueue

    ingest_job_enqueue(job_id=job_id)


def _lost_files_sweep(cutoff: datetime, max_attempts: int) -> list[SweepAction]:
    from sources.services.ingest_sweep import ingest_files_sweep

    return ingest_files_sweep(cutoff=cutoff, max_attempts=max_attempts)


def _ingest_job_failed(job_id: int) -> None:
    from sources.services.ingest_jobs import ingest_job_dropped

    ingest_job_dropped(job_id=job_id)


class SourcesConfig(AppConfig):
    name = "sources"

    def ready(self) -> None:
        from core.jobs import register_stale_sweep
        from sources.models import IngestJob

        register_stale_sweep(IngestJob, _requeue_ingest_job, _ingest_job_failed, parts=_lost_files_sweep)
