"""Reads over sources and chunks."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import Count, Q, QuerySet
from django.utils import timezone

from sources import vectorstore
from sources.models import Chunk, Collection, IngestJob, Source
from sources.reingest import ChunkingDrift, StaleEmbeddings


def chunks_for_export(*, collection: str | None = None) -> Iterator[Chunk]:
    """Every chunk in the index, as search sees it: a source whose new version failed keeps its last good chunks."""
    qs = Chunk.objects.select_related("source")
    if collection:
        qs = qs.filter(source__collection__name=collection)
    return qs.order_by("source__path", "ordinal").iterator(chunk_size=500)


def index_overview() -> list[dict]:
    """Per collection: sources by status and chunk count."""
    rows = []
    for source in Source.objects.select_related("collection").order_by("collection__name", "path"):
        rows.append(
            {
                "collection": source.collection.name,
                "path": source.path,
                "title": source.title,
                "status": source.status,
                "chunks": source.chunk_count,
                "reason": source.reason,
            }
        )
    return rows


def index_counts(*, model: str) -> dict[str, int]:
    """Chunk rows, FTS rows and vectors for ``model`` (the three must always agree), and window vectors."""
    return {
        "chunks": Chunk.objects.count(),
        "fts": vectorstore.fts_count(),
        "vectors": vectorstore.vector_count(model),
        "windows": vectorstore.window_count(model),
    }


def index_version(collection_ids: list[int] | None = None) -> str:
    """Changes whenever a source in these collections (None: any) is ingested, replaced or removed.

    For answer caching: an ingest into a collection outside a question's scope cannot change
    its answer, so it must not throw that answer out of the cache.
    """
    from django.db.models import Count, Max

    sources, chunks = Source.objects.all(), Chunk.objects.all()
    if collection_ids is not None:
        sources, chunks = (
            sources.filter(collection_id__in=collection_ids),
            chunks.filter(source__collection_id__in=collection_ids),
        )
    agg = sources.aggregate(latest=Max("updated_at"), sources=Count("id"))
    return f"{agg['sources']}:{agg['latest'].isoformat() if agg['latest'] else '-'}:{chunks.count()}"


def stale_embeddings(*, model: str, collection_ids: Sequence[int] | None = None) -> list[StaleEmbeddings]:
    """Ingested sources (within ``collection_ids``; None: all) embedded with a model other than ``model``.

    Their vectors live in another model's table, so a search with ``model`` would
    silently miss them. Rows that record no model (written by hand, not by ingest)
    are not judged.
    """
    rows = (
        Source.objects.filter(status=Source.Status.INGESTED).exclude(embedding_model="").exclude(embedding_model=model)
    )
    if collection_ids is not None:
        rows = rows.filter(collection_id__in=list(collection_ids))
    return [
        StaleEmbeddings(
            model=g["embedding_model"],
            collection=g["collection__name"],
            root=g["root"],
            sources=g["sources"],
            private=bool(g["private"]),
        )
        for g in _reingest_groups(rows, "embedding_model")
    ]


def _reingest_groups(rows: QuerySet[Source], by: str) -> list[dict]:
    """Sources counted per ``by`` value, collection and folder (one re-ingest command each)."""
    if not rows.exists():
        return []
    private = Q(path__startswith="private/") | Q(path__contains="/private/")
    return list(
        rows.values(by, "collection__name", "root")
        .annotate(sources=Count("id"), private=Count("id", filter=private))
        .order_by(by, "collection__name", "root")
    )


def chunking_drift(*, chunking: str, model: str) -> list[ChunkingDrift]:
    """Ingested sources embedded with ``model`` whose recorded chunking settings are not ``chunking``.

    The next ingest of their folder re-chunks them. Sources embedded with another model
    are left to ``stale_embeddings`` (their re-ingest re-chunks them too); rows that
    record no model (written by hand, not by ingest) are not judged.
    """
    rows = Source.objects.filter(status=Source.Status.INGESTED, embedding_model=model).exclude(chunking=chunking)
    return [
        ChunkingDrift(
            chunking=g["chunking"],
            collection=g["collection__name"],
            root=g["root"],
            sources=g["sources"],
            private=bool(g["private"]),
        )
        for g in _reingest_groups(rows, "chunking")
    ]


# Row-level security. Every page, API call and query goes through these, so a
# user only ever sees the collections they read. Superusers see everything;
# anyone else sees the collections they are a reader of plus the public ones.
# Objects outside the scope must answer 404, never 403, so ids cannot be probed.


def readable_collections(user: User | AnonymousUser) -> QuerySet[Collection]:
    if not user.is_authenticated or not user.is_active:
        return Collection.objects.none()
    if user.is_superuser:
        return Collection.objects.all()
    return Collection.objects.filter(Q(public=True) | Q(readers=user)).distinct()


def access_contacts(*, limit: int = 3) -> list[str]:
    """Whom to ask for access to more collections: active superusers (they grant it), by name."""
    from django.contrib.auth import get_user_model

    users = get_user_model().objects.filter(is_active=True, is_superuser=True).order_by("username")
    return list(users.values_list("username", flat=True)[:limit])


def readable_collection_ids(user: User | AnonymousUser) -> list[int]:
    """Ids of the readable collections, e.g. for filtering vec0 rows by their collection column."""
    return list(readable_collections(user).order_by("pk").values_list("pk", flat=True))


def query_scope(user: User | AnonymousUser) -> list[int] | None:
    """The ``collection_ids`` a query or run of ``user`` may search: None (everything) for superusers.

    An empty list means "nothing" (retrieval then finds nothing); callers also refuse
    such a request up front with a clear message.
    """
    if user.is_authenticated and user.is_active and user.is_superuser:
        return None
    return readable_collection_ids(user)


def readable_sources(user: User | AnonymousUser) -> QuerySet[Source]:
    return Source.objects.filter(collection__in=readable_collections(user))


def readable_chunks(user: User | AnonymousUser) -> QuerySet[Chunk]:
    return Chunk.objects.filter(source__collection__in=readable_collections(user))


def uploadable_collections(user: User | AnonymousUser) -> QuerySet[Collection]:
    """Staff may upload to any collection; others only to collections they are a reader of.

    Public collections are readable by everyone, but being able to read one does
    not let a user add documents to it.
    """
    if not user.is_authenticated or not user.is_active:
        return Collection.objects.none()
    if user.is_staff or user.is_superuser:
        return Collection.objects.all()
    return Collection.objects.filter(readers=user)


# Background jobs: what the CLI progress bar, `foundry jobs` and the web pages show.


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
    return JobProgress(
        id=job.pk,
        kind="ingest",
        status=job.status,
        stage=job.stage,
        files_done=job.files_done,
        files_total=job.files_total,
        chunks_done=job.chunks_done,
        files_failed=len(failed),
        reason=reason,
        attempts=job.attempts,
        created_at=job.created_at,
        heartbeat_at=job.heartbeat_at,
        finished_at=job.finished_at,
    )
