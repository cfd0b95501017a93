from __future__ import annotations

from django.apps import AppConfig


def _requeue_ingest_job(job_id: int) -> None:
    from sources.services.ingest_jobs import ingest_job_enqueue

    ingest_job_enqueue(job_id=job_id)


def _ingest_job_failed(job_id: int) -> None:
    from sources.services.ingest_jobs import ingest_job_dropped

    ingest_job_dropped(job_id=job_id)


class SourcesConfig(AppConfig):
    name = "sources"

    def ready(self) -> None:
        from core.jobs import register_stale_sweep
        from sources.models import IngestJob

        register_stale_sweep(IngestJob, _requeue_ingest_job, _ingest_job_failed)
