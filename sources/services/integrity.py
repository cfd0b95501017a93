"""Index integrity: chunk rows, FTS rows and vectors must be the same set of chunks
(and every window vector must belong to a chunk).

Problems make ``foundry check`` fail. Warnings do not: sources chunked with other
settings than foundry.yaml sets are whole and searchable, only not chunked as configured.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from django.conf import settings
from django.db import transaction

from core import llm
from sources import selectors, vectorstore
from sources.models import Chunk
from sources.services.chunking import chunk_windows
from sources.services.chunking_settings import chunking_configured, chunking_drift_warning
from sources.services.prepare import with_context

logger = logging.getLogger(__name__)


@dataclass
class IntegrityReport:
    sqlite: str = ""
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.sqlite == "ok" and not self.problems


def index_check() -> IntegrityReport:
    """PRAGMA integrity_check, set comparisons of chunk ids across the three stores, sources
    embedded with another model than the configured one (problems), and sources chunked with
    other settings than the configured ones (warnings); both name the re-ingest commands."""
    report = IntegrityReport()
    model = settings.FOUNDRY.embedding.model
    stale = selectors.stale_embeddings(model=model)
    if stale:
        changed = vectorstore.EmbeddingModelChanged(model, stale)
        report.problems.append(f"{changed.problem}\n{changed.fix}")
    configured = chunking_configured()
    drift = selectors.chunking_drift(chunking=configured, model=model)
    if drift:
        report.warnings.append(chunking_drift_warning(configured=configured, drift=drift))
    report.sqlite = vectorstore.sqlite_integrity()
    fts_problem = vectorstore.fts_integrity()
    if fts_problem:
        report.problems.append(f"FTS index damaged: {fts_problem}")
    chunks, fts = vectorstore.chunk_ids(), vectorstore.fts_ids()
    report.counts = {"chunks": len(chunks), "fts": len(fts)}
    _compare(report, "FTS", chunks, fts)
    current = vectorstore.table_name(model)
    tables = vectorstore.all_tables()
    for table in tables if current in tables else [*tables, current]:
        vectors = vectorstore.vector_ids(table) if table in tables else set()
        report.counts[table] = len(vectors)
        # Every chunk needs a vector from the configured model; the table of a model used
        # before holds what is left of it, which re-ingest empties: only orphans count there.
        _compare(report, table, chunks, vectors, complete=table == current)
    for table in vectorstore.all_tables(kind="windows"):
        owners = vectorstore.window_owners(table)
        report.counts[table] = len(owners)
        # How many windows a chunk has follows from its text, so only orphans are checked.
        _compare(report, table, chunks, set(owners), complete=False)
    return report


def _compare(report: IntegrityReport, name: str, chunks: set[int], other: set[int], *, complete: bool = True) -> None:
    if complete and chunks - other:
        report.problems.append(f"{len(chunks - other)} chunk(s) missing from {name}")
    if other - chunks:
        report.problems.append(f"{len(other - chunks)} orphan row(s) in {name}")


@dataclass
class RepairReport:
    fts_rows: int = 0
    chunks_embedded: int = 0
    orphans_deleted: dict[str, int] = field(default_factory=dict)


def index_repair() -> RepairReport:
    """Rebuild the keyword index from the chunk rows, embed the chunks that lack a vector of the
    configured model (and their sentence windows), and delete vectors whose chunk is gone.

    The chunks are the record: nothing is read from the files, nothing in the chunk rows changes.
    Each part is one transaction, so an interrupted repair leaves the index as it found it or
    repaired, never half-written; running it again is harmless. Sources embedded with another
    model are left to ``foundry ingest`` (the check names the command).
    """
    report = RepairReport()
    with transaction.atomic():
        report.fts_rows = vectorstore.fts_rebuild()
    report.orphans_deleted = _orphans_delete()
    report.chunks_embedded = _missing_vectors_embed()
    logger.info(
        "index repaired fts=%s embedded=%s orphans=%s", report.fts_rows, report.chunks_embedded, report.orphans_deleted
    )
    return report


def _orphans_delete() -> dict[str, int]:
    deleted: dict[str, int] = {}
    with transaction.atomic():
        chunks = vectorstore.chunk_ids()
        for table in vectorstore.all_tables():
            orphans = sorted(vectorstore.vector_ids(table) - chunks)
            vectorstore.orphans_delete(table, orphans)
            deleted[table] = len(orphans)
        for table in vectorstore.all_tables(kind="windows"):
            rows = vectorstore.window_rows(table)
            orphans = sorted(w for w in rows if w // vectorstore.WINDOW_SLOTS not in chunks)
            vectorstore.orphans_delete(table, orphans)
            deleted[table] = len(orphans)
    return {table: n for table, n in deleted.items() if n}


def _missing_vectors_embed() -> int:
    """Embed outside any transaction, as ingest does, then write each chunk's vectors in one short one."""
    conf = settings.FOUNDRY
    model = conf.embedding.model
    have = vectorstore.vector_ids(vectorstore.table_name(model)) if vectorstore.table_exists(model) else set()
    missing = sorted(vectorstore.chunk_ids() - have)
    if not missing:
        return 0
    chunks = list(Chunk.objects.filter(pk__in=missing).select_related("source").order_by("pk"))
    texts: list[str] = []
    owners: list[tuple[int, int]] = []  # (chunk index, window index or -1 for the chunk itself)
    for i, chunk in enumerate(chunks):
        texts.append(with_context(chunk.context, chunk.text))
        owners.append((i, -1))
        windows = chunk_windows(chunk.text, sentences=conf.ingest.window_sentences, limit=vectorstore.WINDOW_SLOTS - 1)
        for w, window in enumerate(windows):
            texts.append(with_context(chunk.context, window))
            owners.append((i, w))
    vectors = llm.embed(texts, model=model, batch_size=conf.embedding.batch_size)
    rows: list[tuple[int, int, list[float]]] = []
    window_rows: list[tuple[int, int, list[float]]] = []
    for (i, w), vector in zip(owners, vectors):
        chunk = chunks[i]
        if w < 0:
            rows.append((chunk.pk, chunk.source.collection_id, vector))
        else:
            window_rows.append((vectorstore.window_id(chunk.pk, w), chunk.source.collection_id, vector))
    with transaction.atomic():
        alive = vectorstore.chunk_ids()  # a chunk an ingest replaced meanwhile needs nothing
        vectorstore.ensure_table(model, len(vectors[0]))
        vectorstore.ensure_windows_table(model, len(vectors[0]))
        done = {pk for pk in missing if pk in alive}
        # The windows of a chunk that lost its vector are made anew with it.
        windows_table = vectorstore.windows_table_name(model)
        old = [w for w in vectorstore.window_rows(windows_table) if w // vectorstore.WINDOW_SLOTS in done]
        vectorstore.orphans_delete(windows_table, old)
        vectorstore.vectors_insert(model, [r for r in rows if r[0] in alive])
        vectorstore.windows_insert(model, [r for r in window_rows if r[0] // vectorstore.WINDOW_SLOTS in alive])
    return len(done)
