"""The audit trail proves itself: every QueryLog row, and every GenerationRun once it is finished, carries a
SHA-256 hash of the previous row's hash and its own content, in one chain per table.

``digest(previous, row)`` hashes every stored column of the row (what was asked, by whom, the cited chunk ids
with the SHA-256 of each cited text, the answer, …) but the hash itself. A row is chained in the transaction
that writes it, under a lock on its chain's head (``AuditChainHead``), so concurrent writers get one order:
the head row is locked first (SQLite's IMMEDIATE transactions already serialise every writer), then the row is
written, read back and hashed as stored, so writing and verifying hash the same values.

``chain_verify`` walks a chain in order and reports the first row that was changed (its hash no longer
matches), removed (a gap in the places, or the head is ahead of the last row), moved (ids out of chain order)
or inserted outside the chain (a row without a place). What it cannot see: someone who rewrites a row *and*
every later hash and the head; a head hash recorded elsewhere (``foundry audit verify`` prints it) shows that.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import models, transaction

from generation.models import FINISHED, AuditChainHead, GenerationRun, QueryLog

QUERIES = "querylog"
RUNS = "generationrun"
GENESIS = "0" * 64
# Changing what is hashed breaks every stored chain: bump the version and re-chain in a migration.
FORMAT = 1
# A run's output path under FOUNDRY_HOME is hashed relative to it, so a restore into another home
# (which moves the documents there, foundry_site/services/backup.py) keeps the chain whole.
HOME_MARK = "$FOUNDRY_HOME"


# What a link hashes (FORMAT 1), by attribute name: every column but the hash (and a run's heartbeat, a sign of
# life rather than content). Listed, not read from the model, so a column added later leaves stored chains whole.
FIELDS = {
    QUERIES: (
        "id", "chain_seq", "run_id", "kind", "user_id", "question", "message", "conversation_id", "mode",
        "collection_ids", "hyde_text", "channels", "gate", "answer_class", "answer", "citations", "grounding",
        "conflicts", "coverage", "refusal", "prompt_tokens", "completion_tokens", "cost", "llm_calls", "model",
        "timings", "status", "error", "cached", "cache_key", "created_at",
    ),
    RUNS: (
        "id", "chain_seq", "topic", "spec_name", "spec_version", "spec_body", "status", "stage", "created_by_id",
        "collection_ids", "models_used", "prompt", "chunks", "gate", "conflicts", "output_path", "coverage",
        "low_confidence", "grounding", "sentences_total", "sentences_kept", "prompt_tokens", "completion_tokens",
        "cost", "llm_calls", "timings", "error", "created_at", "started_at", "finished_at", "attempts",
    ),
}  # fmt: skip


def text_sha256(text: str) -> str:
    """The hash a citation records of the passage text it quoted."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"audit chain: cannot hash a {type(value).__name__}")


def digest(previous: str, row: dict[str, Any], *, home: str | None = None) -> str:
    """The hash of a row (its column values by attribute name, as read from the database) chained to
    ``previous``. Pure; ``home`` defaults to FOUNDRY_HOME."""
    values = {k: v for k, v in row.items() if k != "chain_hash"}  # the stored hash is what is checked
    mark = f"{(home or str(settings.FOUNDRY_HOME)).rstrip('/')}/"
    path = values.get("output_path")
    if isinstance(path, str) and path.startswith(mark):
        values["output_path"] = f"{HOME_MARK}/{path[len(mark) :]}"
    material = json.dumps(
        {"format": FORMAT, "previous": previous, "row": values},
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
        default=_jsonable,
    )
    return hashlib.sha256(material.encode("utf-8")).hexdigest()


def _raw(model: type[models.Model]) -> models.QuerySet:
    # The plain queryset: QueryLog's own refuses every update, and sealing a row in the transaction that
    # inserts it is the one write an audit row gets.
    return models.QuerySet(model=model)


def _columns(model: type[models.Model]) -> tuple[str, ...]:
    return (*FIELDS[QUERIES if model is QueryLog else RUNS], "chain_hash")


def _locked_head(chain: str) -> AuditChainHead:
    head, _ = AuditChainHead.objects.select_for_update().get_or_create(chain=chain, defaults={"hash": GENESIS})
    return head


def _seal(model: type[models.Model], pk: int, head: AuditChainHead) -> str:
    """Hash the row as stored, onto ``head``; move the head to it (caller holds the transaction and the lock)."""
    row = _raw(model).filter(pk=pk).values(*_columns(model)).get()
    value = digest(head.hash, row)
    _raw(model).filter(pk=pk).update(chain_hash=value)
    AuditChainHead.objects.filter(pk=head.pk).update(seq=row["chain_seq"], hash=value)
    return value


def query_record(**fields: Any) -> QueryLog:
    """The only way to write a query-log row: inserted and chained to the previous row in one transaction."""
    with transaction.atomic():
        row = QueryLog(**fields)
        row._recording = True  # type: ignore[attr-defined]
        head = _locked_head(QUERIES)
        row.chain_seq = head.seq + 1
        row.save(force_insert=True)
        row.chain_hash = _seal(QueryLog, row.pk, head)
    return row


def run_chain(*, run_id: int) -> None:
    """Chain a finished run (caller holds the transaction that finished it). Idempotent: a run already in the
    chain, or not finished, is left alone."""
    head = _locked_head(RUNS)
    if (
        _raw(GenerationRun)
        .filter(pk=run_id, status__in=FINISHED, chain_seq__isnull=True)
        .update(chain_seq=head.seq + 1)
    ):
        _seal(GenerationRun, run_id, head)


# --------------------------------------------------------------------------- verification


@dataclass(frozen=True)
class Break:
    """Where a chain stops proving itself. ``row_id`` is None when the row is gone."""

    problem: str  # changed | removed | out_of_order | unchained
    row_id: int | None
    seq: int | None
    detail: str


@dataclass
class ChainReport:
    chain: str
    rows: int = 0
    head_seq: int = 0
    head_hash: str = GENESIS
    breaks: list[Break] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.breaks

    @property
    def first(self) -> Break | None:
        return self.breaks[0] if self.breaks else None


def _walk(model: type[models.Model], *, ids_ascend: bool) -> Iterator[tuple[dict[str, Any], Break | None]]:
    previous, expected, last_id = GENESIS, 1, 0
    rows = _raw(model).filter(chain_seq__isnull=False).order_by("chain_seq").values(*_columns(model))
    for row in rows.iterator(chunk_size=500):
        pk, seq = row["id"], row["chain_seq"]
        problem = None
        if seq != expected:
            gone = f"{expected}" if seq == expected + 1 else f"{expected}–{seq - 1}"
            problem = Break("removed", pk, seq, f"place {gone} of the chain is missing: removed before row {pk}")
        elif ids_ascend and pk <= last_id:
            problem = Break("out_of_order", pk, seq, f"row {pk} is chained after row {last_id}: moved or inserted")
        elif digest(previous, row) != row["chain_hash"]:
            problem = Break("changed", pk, seq, f"row {pk} does not match its hash: changed after it was written")
        yield row, problem
        # The next row links to the hash as stored, so one changed row is reported once, not with every later one.
        previous, expected, last_id = row["chain_hash"] or "", seq + 1, max(last_id, pk)


def chain_verify(chain: str) -> ChainReport:
    """Check one chain (``QUERIES`` or ``RUNS``) from its first row to its head; every break, in chain order."""
    model = QueryLog if chain == QUERIES else GenerationRun
    report = ChainReport(chain)
    last: dict[str, Any] | None = None
    for row, problem in _walk(model, ids_ascend=model is QueryLog):
        report.rows += 1
        last = row
        if problem is not None:
            report.breaks.append(problem)
    head = AuditChainHead.objects.filter(chain=chain).first()
    report.head_seq, report.head_hash = (head.seq, head.hash) if head else (0, GENESIS)
    last_seq = last["chain_seq"] if last else 0
    if report.head_seq > last_seq:
        detail = f"the chain's head is at place {report.head_seq}, its last row at {last_seq}: rows removed at the end"
        report.breaks.append(Break("removed", None, last_seq + 1, detail))
    elif last is not None and (report.head_seq, report.head_hash) != (last_seq, last["chain_hash"]):
        detail = f"row {last['id']} is the last link but the chain's head does not name it"
        report.breaks.append(Break("changed", last["id"], last_seq, detail))
    outside = _raw(model).filter(chain_seq__isnull=True)
    if model is GenerationRun:
        outside = outside.filter(status__in=FINISHED)  # an open run is chained when it finishes
    for pk in outside.order_by("pk").values_list("pk", flat=True)[:20]:
        report.breaks.append(Break("unchained", pk, None, f"row {pk} is not in the chain: written around it"))
    return report


def audit_verify() -> list[ChainReport]:
    """Both chains: the query log, then the generation runs."""
    return [chain_verify(QUERIES), chain_verify(RUNS)]
