"""Index integrity: chunk rows, FTS rows and vectors must be the same set of chunks
(and every window vector must belong to a chunk).

Problems make ``foundry check`` fail. Warnings do not: sources chunked with other
settings than foundry.yaml sets are whole and searchable, only not chunked as configured.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from django.conf import settings
from django.db import DatabaseError, connection

from sources import selectors, vectorstore
from sources.services.chunking_settings import chunking_configured, chunking_drift_warning


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
    with connection.cursor() as cur:
        cur.execute("PRAGMA integrity_check")
        report.sqlite = "; ".join(row[0] for row in cur.fetchall())
        try:
            cur.execute("INSERT INTO chunks_fts(chunks_fts, rank) VALUES ('integrity-check', 1)")
        except DatabaseError as exc:  # FTS5 reports a damaged index by raising, not by returning rows
            report.problems.append(f"FTS index damaged: {exc}")
        cur.execute("SELECT id FROM sources_chunk")
        chunks = {row[0] for row in cur.fetchall()}
        cur.execute("SELECT rowid FROM chunks_fts")
        fts = {row[0] for row in cur.fetchall()}
        report.counts = {"chunks": len(chunks), "fts": len(fts)}
        _compare(report, "FTS", chunks, fts)
        current = vectorstore.table_name(model)
        tables = vectorstore.all_tables()
        for table in tables if current in tables else [*tables, current]:
            vectors = set()
            if table in tables:
                cur.execute(f"SELECT chunk_id FROM {table}")
                vectors = {row[0] for row in cur.fetchall()}
            report.counts[table] = len(vectors)
            # Every chunk needs a vector from the configured model; the table of a model used
            # before holds what is left of it, which re-ingest empties: only orphans count there.
            _compare(report, table, chunks, vectors, complete=table == current)
        for table in vectorstore.all_tables(kind="windows"):
            cur.execute(f"SELECT window_id FROM {table}")
            owners = [row[0] // vectorstore.WINDOW_SLOTS for row in cur.fetchall()]
            report.counts[table] = len(owners)
            # How many windows a chunk has follows from its text, so only orphans are checked.
            _compare(report, table, chunks, set(owners), complete=False)
    return report


def _compare(report: IntegrityReport, name: str, chunks: set[int], other: set[int], *,
             complete: bool = True) -> None:
    if complete and chunks - other:
        report.problems.append(f"{len(chunks - other)} chunk(s) missing from {name}")
    if other - chunks:
        report.problems.append(f"{len(other - chunks)} orphan row(s) in {name}")
