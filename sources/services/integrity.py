"""Index integrity: chunk rows, FTS rows and vectors must be the same set of chunks
(and every window vector must belong to a chunk).

Problems make ``foundry check`` fail. Warnings do not: sources chunked with other
settings than foundry.yaml sets are whole and searchable, only not chunked as configured.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.conf import settings

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
