"""The write side of the vec0 tables: each vector is reached by its primary key, never by a scan.

sqlite-vec 0.1.9 plans ``chunk_id IN (…)`` (a list or a subquery) as a scan of the
whole vec0 table, and ``chunk_id = ?`` as a primary-key lookup. ``source_index_complete``
runs for every unchanged file of every ingest and ``vectors_delete`` for every
re-ingested or removed one, so a scan in either costs a pass over millions of
vectors per file. The tests read SQLite's own plan for every statement the two
functions send (``EXPLAIN QUERY PLAN``), so they need no large table and no timing.
On PostgreSQL (``FOUNDRY_TEST_STORE=postgres``) the plan checks are skipped; what the functions return and
leave behind is checked on both stores.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.db import connection

from sources import vectorstore
from sources.models import Chunk, Collection, Source

pytestmark = pytest.mark.django_db

MODEL = "test/plan-embedder"
TABLE = vectorstore.table_name(MODEL)
# sqlite-vec names its plan in the first character of idxStr: 1 full scan, 2 lookup by primary key, 3 KNN.
VEC_PLAN = re.compile(rf"(?:SCAN|SEARCH) {TABLE} VIRTUAL TABLE INDEX \d+:(\d)")
# FTS5's idxStr "=" is a lookup by rowid (SQLite runs it once per value of an IN list).
FTS_BY_ROWID = re.compile(r"chunks_fts VIRTUAL TABLE INDEX \d+:=")

Statement = tuple[str, Any, bool]  # (sql, params, executemany)


def make_source(collection: Collection, name: str, chunks: int) -> tuple[Source, list[int]]:
    """A source with ``chunks`` chunks (their FTS rows come from the triggers) and their vectors."""
    source = Source.objects.create(
        collection=collection,
        root="/kb",
        path=name,
        status=Source.Status.INGESTED,
        chunk_count=chunks,
        embedding_model=MODEL,
    )
    rows = Chunk.objects.bulk_create(
        [
            Chunk(source=source, ordinal=i, text=f"{name} part {i}", line_start=1, line_end=1, token_count=3)
            for i in range(chunks)
        ]
    )
    vectorstore.ensure_table(MODEL, 4)
    vectorstore.vectors_insert(MODEL, [(c.pk, collection.pk, [1.0, float(c.pk), 0.5, 0.0]) for c in rows])
    return source, [c.pk for c in rows]


@pytest.fixture
def sources() -> dict[str, tuple[Source, list[int]]]:
    collection = Collection.objects.create(name="plans")
    return {name: make_source(collection, name, n) for name, n in (("a.md", 5), ("b.md", 300), ("c.md", 3))}


@contextmanager
def recorded() -> Iterator[list[Statement]]:
    """Every statement sent through Django's connection inside the block, with its parameters."""
    statements: list[Statement] = []

    def record(execute: Callable[..., Any], sql: str, params: Any, many: bool, context: dict) -> Any:
        statements.append((sql, params, many))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(record):
        yield statements


def plan(sql: str, params: Any) -> list[str]:
    with connection.cursor() as cur:
        cur.execute(f"EXPLAIN QUERY PLAN {sql}", params)
        return [row[3] for row in cur.fetchall()]


def vec_plan_kinds(statements: list[Statement]) -> list[str]:
    """The sqlite-vec plan kind of every step on the vec0 table, over all statements that touch it."""
    kinds = []
    for sql, params, many in statements:
        if TABLE in sql:
            for step in plan(sql, params[0] if many else params):
                kinds += VEC_PLAN.findall(step)
    return kinds


@pytest.mark.sqlite_only
def test_the_plan_check_sees_the_full_scan_of_an_in_list(sources: dict) -> None:
    """The old statements, for contrast: ``IN`` plans as a full scan, ``=`` as a primary-key lookup."""
    source, ids = sources["a.md"]
    old = (
        f"SELECT count(*) FROM {TABLE} WHERE chunk_id IN (SELECT id FROM sources_chunk WHERE source_id = %s)",
        [source.pk],
        False,
    )
    assert vec_plan_kinds([old]) == ["1"]
    assert vec_plan_kinds([(f"DELETE FROM {TABLE} WHERE chunk_id IN (%s, %s)", ids[:2], False)]) == ["1"]
    assert vec_plan_kinds([(f"SELECT 1 FROM {TABLE} WHERE chunk_id = %s", [ids[0]], False)]) == ["2"]


@pytest.mark.sqlite_only
def test_source_index_complete_looks_each_vector_up_by_primary_key(sources: dict) -> None:
    source, ids = sources["a.md"]
    with recorded() as statements:
        assert vectorstore.source_index_complete(source.pk, source.chunk_count, MODEL)
    assert vec_plan_kinds(statements) == ["2"] * len(ids)  # one lookup per chunk, none a scan
    fts = [step for sql, params, _ in statements if "chunks_fts" in sql for step in plan(sql, params)]
    assert fts and all(FTS_BY_ROWID.search(step) for step in fts if "chunks_fts" in step), fts


def test_source_index_complete_still_sees_every_gap(sources: dict) -> None:
    source, ids = sources["a.md"]
    assert vectorstore.source_index_complete(source.pk, 5, MODEL)
    assert not vectorstore.source_index_complete(source.pk, 6, MODEL)  # the source says it has more chunks
    with connection.cursor() as cur:
        cur.execute(f"DELETE FROM {TABLE} WHERE chunk_id = %s", [ids[3]])
    assert not vectorstore.source_index_complete(source.pk, 5, MODEL)  # a vector is missing
    other, other_ids = sources["c.md"]
    with connection.cursor() as cur:
        key = "rowid" if connection.vendor == "sqlite" else "chunk_id"
        cur.execute(f"DELETE FROM chunks_fts WHERE {key} = %s", [other_ids[0]])
    assert not vectorstore.source_index_complete(other.pk, 3, MODEL)  # an FTS row is missing
    assert vectorstore.source_index_complete(sources["b.md"][0].pk, 300, MODEL)


def test_vectors_delete_deletes_each_vector_by_primary_key(sources: dict) -> None:
    _, ids = sources["b.md"]
    keep = sources["a.md"][1] + sources["c.md"][1]
    with recorded() as statements:
        vectorstore.vectors_delete(ids)
    if connection.vendor == "sqlite":
        assert vec_plan_kinds(statements) and set(vec_plan_kinds(statements)) == {"2"}
        assert sum(len(params) if many else 1 for sql, params, many in statements if TABLE in sql) == len(ids)
    with connection.cursor() as cur:
        cur.execute(f"SELECT chunk_id FROM {TABLE} ORDER BY chunk_id")
        assert [row[0] for row in cur.fetchall()] == sorted(keep)


WINDOWS = vectorstore.windows_table_name(MODEL)
WINDOW_PLAN = re.compile(rf"(?:SCAN|SEARCH) {WINDOWS} VIRTUAL TABLE INDEX \d+:(\d)")


def test_vectors_delete_removes_each_chunks_windows_by_primary_key(sources: dict) -> None:
    _, ids = sources["a.md"]
    keep = sources["c.md"][1]
    vectorstore.ensure_windows_table(MODEL, 4)
    vectorstore.windows_insert(
        MODEL, [(vectorstore.window_id(cid, j), 1, [0.5, 1.0, float(j), 0.0]) for cid in ids + keep for j in range(3)]
    )
    with recorded() as statements:
        vectorstore.vectors_delete(ids)
    if connection.vendor == "sqlite":
        kinds = [
            kind
            for sql, params, many in statements
            if WINDOWS in sql
            for step in plan(sql, params[0] if many else params)
            for kind in WINDOW_PLAN.findall(step)
        ]
        assert kinds and "1" not in kinds, kinds  # never a scan of the whole windows table
    with connection.cursor() as cur:
        cur.execute(f"SELECT window_id FROM {WINDOWS} ORDER BY window_id")
        assert [row[0] for row in cur.fetchall()] == sorted(vectorstore.window_id(c, j) for c in keep for j in range(3))
    assert vectorstore.window_count(MODEL) == 9


def test_window_ids_stay_inside_their_chunks_slots() -> None:
    assert vectorstore.window_id(7, 0) == 7 * vectorstore.WINDOW_SLOTS + 1
    assert vectorstore.window_id(7, vectorstore.WINDOW_SLOTS - 2) == 8 * vectorstore.WINDOW_SLOTS - 1
    with pytest.raises(ValueError):
        vectorstore.window_id(7, vectorstore.WINDOW_SLOTS - 1)
