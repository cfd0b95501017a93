"""Reads over sources and chunks."""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime

from django.utils import timezone

from sources.models import Chunk, IngestJob, Source


def chunks_for_export(*, collection: str | None = None) -> Iterator[Chunk]:
    qs = Chunk.objects.select_related("source").filter(source__status=Source.Status.INGESTED)
    if collection:
        qs = qs.filter(source__collection__name=collection)
    return qs.order_by("source__path", "ordinal").iterator(chunk_size=500)


def index_overview() -> list[dict]:
    """Per collection: sources by status and chunk count."""
    rows = []
    for source in Source.objects.select_related("collection").order_by("collection__name", "path"):
        rows.append({"collection": source.collection.name, "path": source.path, "title": source.title,
                     "status": source.status, "chunks": source.chunk_count, "reason": source.reason})
    return rows


def index_counts(*, model: str) -> dict[str, int]:
    """Chunk rows, FTS rows and vectors for ``model``: the three must always agree."""
    from django.db import connection

    from sources import vectorstore

    with connection.cursor() as cur:
        cur.execute("SELECT count(*) FROM chunks_fts")
        fts = cur.fetchone()[0]
    return {"chunks": Chunk.objects.count(), "fts": fts, "vectors": vectorstore.vector_count(model)}


@dataclass(frozen=True)
class JobProgress:
    """What the CLI and the web pages show about one ingest job."""

    id: int
    kind: str
    status: str
    stage: str
    files_done: int
    files_total: int
    chunks_done: int
    files_failed: int
    reason: str
    attempts: int
    created_at: datetime
    heartbeat_at: datetime
    finished_at: datetime | None

    @property
    def percent(self) -> float:
        return 100.0 * self.files_done / self.files_total if self.files_total else 100.0

    @property
    def idle_seconds(self) -> float:
        """Seconds since the last sign of life (the sweeper acts on this)."""
        return (timezone.now() - self.heartbeat_at).total_seconds()


def ingest_job_progress(*, job_id: int) -> JobProgress:
    """Progress of one job; raises IngestJob.DoesNotExist for an unknown id."""
    return _progress(IngestJob.objects.get(pk=job_id))


def ingest_jobs_listing(*, include_finished: bool = False, limit: int = 50) -> list[JobProgress]:
    """Queued, running and failed jobs, plus finished jobs with failed files; every job with ``include_finished``."""
    rows = [_progress(job) for job in IngestJob.objects.order_by("-created_at")[: limit * 4]]
    if not include_finished:
        rows = [r for r in rows if r.status != IngestJob.Status.SUCCEEDED or r.files_failed]
    return rows[:limit]


def _progress(job: IngestJob) -> JobProgress:
    failed = [r for r in job.results if r["status"] == "failed"]
    reason = job.error
    if not reason and failed:
        first = failed[0]
        reason = f"{len(failed)} file(s) failed; first: {first['path']}: {first['reason']}"
    return JobProgress(id=job.pk, kind="ingest", status=job.status, stage=job.stage, files_done=job.files_done,
                       files_total=job.files_total, chunks_done=job.chunks_done, files_failed=len(failed),
                       reason=reason, attempts=job.attempts, created_at=job.created_at,
                       heartbeat_at=job.heartbeat_at, finished_at=job.finished_at)
