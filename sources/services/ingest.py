"""Ingest: a folder (or one file) becomes sources, chunks, FTS rows and vectors.

Guarantees:
- idempotent: a file whose sha256, embedding model, chunking settings and status
  are unchanged is skipped; a changed file, or one chunked with other settings
  (``chunking_settings``), is replaced; a file gone from the folder is removed
  with its chunks and vectors;
- atomic per source: chunks, FTS rows (by trigger), vectors and the summary of
  one source are written in one short transaction after all slow work (parsing,
  LLM calls, embedding) is done, so a source is either fully there or not at all;
- a bad file is reported with its reason and never stops the run;
- split for scale-out: ``sources.services.prepare`` scans folders and does the slow,
  pure work without opening the database (it runs on ``compute`` workers anywhere);
  this module is the database side: ``source_store_prepared`` writes a prepared
  payload (on the ``db`` worker next to the SQLite file).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime, UTC
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from core import language
from sources import vectorstore
from sources.models import Chunk, Collection, Source, SourceSummary, cited_names
from sources.services import collections, prepare
from sources.services.chunking_settings import chunking_configured, rechunk_reason
from sources.services.extract import kind_of

logger = logging.getLogger(__name__)

DEFAULT_COLLECTION = "default"


@dataclass
class FileResult:
    path: str
    status: str  # ingested | unchanged | skipped | failed | removed
    reason: str = ""
    chunks: int = 0


@dataclass
class IngestReport:
    files: list[FileResult] = field(default_factory=list)

    def count(self, status: str) -> int:
        return sum(1 for f in self.files if f.status == status)

    def as_dict(self) -> dict:
        return {
            "ingested": self.count("ingested"),
            "unchanged": self.count("unchanged"),
            "skipped": self.count("skipped"),
            "failed": self.count("failed"),
            "removed": self.count("removed"),
            "chunks": sum(f.chunks for f in self.files if f.status == "ingested"),
            "files": [asdict(f) for f in self.files],
        }


class CollectionMoveRefused(ValueError):
    """Ingesting would move sources out of the collection they are in; the message names them."""


ProgressFn = Callable[[FileResult], None]


def collection_get_or_create(*, name: str) -> Collection:
    collection = Collection.objects.filter(name=name).first()
    if collection is None:
        collections.collection_name_check(name)
        collection = Collection.objects.create(name=name)
    return collection


def collection_moves_check(*, root: Path, rels: list[str], collection: Collection) -> None:
    """Refuse an ingest that would move sources out of another collection.

    A source is one file under one root, in one collection; ingesting the same
    files into another collection moves them, and with them who may read them.
    That has to be asked for (``move=True``, ``foundry ingest --move``).
    """
    wanted = set(rels)
    elsewhere: dict[str, list[str]] = {}
    for path, name in (
        Source.objects.filter(root=str(root))
        .exclude(collection=collection)
        .values_list("path", "collection__name")
        .order_by("path")
        .iterator()
    ):
        if path in wanted:
            elsewhere.setdefault(name, []).append(path)
    if elsewhere:
        where = "; ".join(f"{len(paths)} in collection {name!r} (e.g. {paths[0]})" for name, paths in elsewhere.items())
        raise CollectionMoveRefused(
            f"{root}: files already ingested into another collection: {where}. Ingesting them into "
            f"{collection.name!r} would move them out of it and change who can read them; ingest into that "
            f"collection, or add --move to move them"
        )


def source_unchanged(*, root: str, rel: str, collection_id: int, digest: str) -> Source | None:
    """The source, if it is already ingested from exactly these bytes with the configured model and chunking."""
    model = settings.FOUNDRY.embedding.model
    existing = Source.objects.filter(root=root, path=rel).first()
    if (
        existing
        and existing.sha256 == digest
        and existing.status == Source.Status.INGESTED
        and existing.embedding_model == model
        and existing.collection_id == collection_id
        and existing.chunking == chunking_configured()
        and vectorstore.table_exists(model)
        and vectorstore.source_index_complete(existing.pk, existing.chunk_count, model)
    ):
        return existing
    return None


def source_ingest(*, root: str, rel: str, collection_id: int) -> FileResult:
    """Ingest one file in-process (prepare, then store). Safe to run twice: the second run reports it unchanged."""
    path = Path(root) / rel
    try:
        digest = prepare.file_digest(path)
    except OSError as exc:
        return source_mark_failed(
            root=root, rel=rel, collection_id=collection_id, reason=f"cannot read file: {exc.strerror or exc}"
        )
    existing = source_unchanged(root=root, rel=rel, collection_id=collection_id, digest=digest)
    if existing:
        return FileResult(rel, "unchanged", "", existing.chunk_count)
    return source_store_prepared(
        root=root, rel=rel, collection_id=collection_id, payload=prepare.source_prepare(root=root, rel=rel)
    )


def source_store_prepared(*, root: str, rel: str, collection_id: int, payload: dict[str, Any]) -> FileResult:
    """Write a prepared payload (or its failure) for one file. Idempotent: the same bytes twice is ``unchanged``."""
    if payload["status"] == "failed":
        return source_mark_failed(
            root=root,
            rel=rel,
            collection_id=collection_id,
            reason=payload["reason"],
            digest=payload["sha256"],
            size=payload["size"],
        )
    if payload.get("v") != prepare.PAYLOAD_VERSION:
        return source_mark_failed(
            root=root,
            rel=rel,
            collection_id=collection_id,
            digest=payload.get("sha256", ""),
            size=payload.get("size", 0),
            reason=f"prepared by a worker that writes payload version {payload.get('v')!r}, but this one reads "
            f"{prepare.PAYLOAD_VERSION}; every worker must run the same Foundry release",
        )
    model = settings.FOUNDRY.embedding.model
    if payload["model"] != model:
        return source_mark_failed(
            root=root,
            rel=rel,
            collection_id=collection_id,
            digest=payload["sha256"],
            size=payload["size"],
            reason=f"prepared with embedding model {payload['model']} but this knowledge base uses {model}; "
            "every worker must read the same foundry.yaml",
        )
    existing = source_unchanged(root=root, rel=rel, collection_id=collection_id, digest=payload["sha256"])
    if existing:
        return FileResult(rel, "unchanged", "", existing.chunk_count)
    prepared = prepare.payload_decode(payload)
    previous = (
        Source.objects.filter(root=root, path=rel, status=Source.Status.INGESTED, sha256=payload["sha256"])
        .values_list("chunking", flat=True)
        .first()
    )
    reason = "; ".join(
        filter(
            None,
            [
                *prepared.notes,
                rechunk_reason(previous=previous, prepared=prepared.chunking, configured=chunking_configured()),
            ],
        )
    )
    source = _store(
        root=root,
        rel=rel,
        collection_id=collection_id,
        digest=payload["sha256"],
        data_size=payload["size"],
        mtime=payload["mtime"],
        prepared=prepared,
    )
    logger.info("ingested source=%s chunks=%s", source.pk, source.chunk_count)
    return FileResult(rel, "ingested", reason, source.chunk_count)


def _store(
    *, root: str, rel: str, collection_id: int, digest: str, data_size: int, mtime: float, prepared: prepare.Prepared
) -> Source:
    """Replace the source's chunks, vectors and summary in one transaction."""
    model = settings.FOUNDRY.embedding.model
    now = timezone.now()
    languages = language.texts_languages([d.text for d in prepared.drafts])
    stems = [language.keyword_stems(d.text, code) for d, code in zip(prepared.drafts, languages)]
    with transaction.atomic():
        vectorstore.ensure_table(model, len(prepared.vectors[0]))
        vectorstore.ensure_windows_table(model, len(prepared.vectors[0]))
        # Two db workers storing the same file: the row lock makes the second wait until the first commits and
        # then replace its chunks, never add to them (on PostgreSQL; SQLite's IMMEDIATE transactions already
        # serialise every writer, and Django skips FOR UPDATE there). The (root, path) unique constraint
        # settles two that create the source at once.
        source, created = Source.objects.select_for_update().get_or_create(
            root=root, path=rel, defaults={"collection_id": collection_id}
        )
        renamed = created or source.collection_id != collection_id  # new, or moved to another collection
        old_ids = list(source.chunks.values_list("id", flat=True))
        vectorstore.vectors_delete(old_ids)
        source.chunks.all().delete()
        chunks = Chunk.objects.bulk_create(
            [
                Chunk(
                    source=source,
                    ordinal=i,
                    text=d.text,
                    heading=" > ".join(d.heading),
                    page_start=d.page_start,
                    page_end=d.page_end,
                    line_start=d.line_start,
                    line_end=d.line_end,
                    token_count=d.token_count,
                    context=ctx,
                    ocr_confidence=d.ocr_confidence,
                    line_map=d.line_map,
                    language=languages[i],
                    stems=stems[i],
                    created_at=now,
                )
                for i, (d, ctx) in enumerate(zip(prepared.drafts, prepared.contexts))
            ]
        )
        vectorstore.vectors_insert(model, [(c.pk, collection_id, v) for c, v in zip(chunks, prepared.vectors)])
        vectorstore.windows_insert(model, _window_rows(chunks, prepared, collection_id))
        SourceSummary.objects.filter(source=source).delete()
        if prepared.summary is not None:
            SourceSummary.objects.create(source=source, text=prepared.summary.text, model=prepared.summary.model)
        Source.objects.filter(pk=source.pk).update(
            collection_id=collection_id,
            title=prepared.title[:500],
            kind=prepared.kind,
            sha256=digest,
            size=data_size,
            mtime=datetime.fromtimestamp(mtime, tz=UTC),
            issued=datetime.fromisoformat(prepared.issued) if prepared.issued else None,
            status=Source.Status.INGESTED,
            reason="; ".join(prepared.notes),
            chunk_count=len(chunks),
            embedding_model=model,
            chunking=prepared.chunking,
            updated_at=now,
            ingested_at=now,
        )
        if renamed:
            source_names_refresh(rel)
        source.refresh_from_db()
    return source


def _window_rows(
    chunks: list[Chunk], prepared: prepare.Prepared, collection_id: int
) -> list[tuple[int, int, list[float]]]:
    """(window id, collection, vector) of each window: the n-th window of a chunk takes its n-th slot."""
    seen: dict[int, int] = {}
    rows = []
    for owner, vector in zip(prepared.window_owners, prepared.window_vectors):
        index = seen.get(owner, 0)
        seen[owner] = index + 1
        rows.append((vectorstore.window_id(chunks[owner].pk, index), collection_id, vector))
    return rows


def source_mark_failed(
    *, root: str, rel: str, collection_id: int, reason: str, digest: str = "", size: int = 0
) -> FileResult:
    """Record a failure. A previously ingested version stays searchable, and the reason says so."""
    now = timezone.now()
    with transaction.atomic():
        source, created = Source.objects.get_or_create(
            root=root, path=rel, defaults={"collection_id": collection_id, "kind": kind_of(Path(rel)) or ""}
        )
        if created:
            source_names_refresh(rel)
        kept = source.chunk_count if not created else 0
        note = f"{reason} (the previously ingested version stays indexed)" if kept else reason
        Source.objects.filter(pk=source.pk).update(
            status=Source.Status.FAILED,
            reason=note,
            updated_at=now,
            sha256=digest or source.sha256,
            size=size or source.size,
        )
    logger.warning("ingest failed source=%s", source.pk)
    return FileResult(rel, "failed", note, 0)


def source_names_refresh(path: str) -> None:
    """Name the sources at ``path`` as citations show them (``cited_names``), inside the caller's transaction.

    Only the folders of one collection tell each other's files apart: what a collection's readers see never
    depends on the files of a collection they may not read."""
    by_collection: dict[int, dict[str, int]] = {}
    for collection_id, root, pk in Source.objects.filter(path=path).values_list("collection_id", "root", "pk"):
        by_collection.setdefault(collection_id, {})[root] = pk
    for pk_of in by_collection.values():
        for root, name in cited_names(path, list(pk_of)).items():
            Source.objects.filter(pk=pk_of[root]).exclude(name=name).update(name=name)


def source_delete(*, source_id: int) -> None:
    """Remove a source with its chunks, FTS rows, vectors and summary, in one transaction."""
    with transaction.atomic():
        ids = list(Chunk.objects.filter(source_id=source_id).values_list("id", flat=True))
        vectorstore.vectors_delete(ids)
        paths = list(Source.objects.filter(pk=source_id).values_list("path", flat=True))
        Source.objects.filter(pk=source_id).delete()
        for path in paths:
            source_names_refresh(path)
