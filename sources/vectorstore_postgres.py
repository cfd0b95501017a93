"""``sources.vectorstore`` on PostgreSQL: pgvector tables and the ``tsvector`` keyword index.

Each function here stands in for the one of the same name in ``sources/vectorstore.py`` when the
connection is PostgreSQL (``core.db_vendor.postgres_variant``), with the same arguments and results.

``vec_chunks_{slug}`` and ``vec_windows_{slug}`` are plain tables: the key, ``collection_id`` and
``embedding vector(N)``, with an HNSW index for cosine distance (``vector_cosine_ops``), so
``1 - distance`` is the similarity, as on vec0. Unlike vec0, a range of keys or ``= ANY`` is an index
look-up, so deletes and look-ups go by set, not one id at a time. Vectors travel as pgvector's text
form (float32 on both sides, so the stored values are those SQLite stores) and come back as float32 bytes.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from django.db import connection

from sources import vectorstore

_INDEX_OPTIONS = "m = 16, ef_construction = 64"  # pgvector's defaults, written out so a reader sees them


def literal(vector: Sequence[float] | np.ndarray) -> str:
    """pgvector's text form of ``vector`` (bound as a parameter and cast with ``::vector``)."""
    return "[" + ",".join(repr(float(x)) for x in np.asarray(vector, dtype=np.float32)) + "]"


def as_bytes(values: Sequence[float]) -> bytes:
    """A vector read as ``real[]`` back as the float32 bytes ``vectorstore.serialize`` writes."""
    return np.asarray(values, dtype=np.float32).tobytes()


def _exists(table: str) -> bool:
    with connection.cursor() as cur:
        cur.execute("SELECT to_regclass(%s) IS NOT NULL", [table])
        return bool(cur.fetchone()[0])


def table_exists(model: str) -> bool:
    return _exists(vectorstore.table_name(model))


def windows_exist(model: str) -> bool:
    return _exists(vectorstore.windows_table_name(model))


def table_dimension(model: str) -> int | None:
    """The N of the table's ``vector(N)`` column (pgvector keeps it as the type modifier)."""
    if not table_exists(model):
        return None
    with connection.cursor() as cur:
        cur.execute(
            "SELECT atttypmod FROM pg_attribute WHERE attrelid = to_regclass(%s) AND attname = 'embedding'",
            [vectorstore.table_name(model)],
        )
        row = cur.fetchone()
    return int(row[0]) if row and row[0] > 0 else None


def _create(table: str, key: str, dimension: int) -> None:
    """Create the table and its index unless they exist. Two first ingests at once would both try, and
    ``IF NOT EXISTS`` does not stop a race in PostgreSQL's catalogue, so a transaction lock on the name
    makes the second wait for the first's commit."""
    with connection.cursor() as cur:
        cur.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [table])
        cur.execute(
            f"CREATE TABLE IF NOT EXISTS {table} ("
            f"{key} bigint PRIMARY KEY, collection_id integer, embedding vector({int(dimension)}) NOT NULL)"
        )
        cur.execute(
            f"CREATE INDEX IF NOT EXISTS {table}_hnsw ON {table} "
            f"USING hnsw (embedding vector_cosine_ops) WITH ({_INDEX_OPTIONS})"
        )


def table_create(model: str, dimension: int) -> None:
    _create(vectorstore.table_name(model), "chunk_id", dimension)


def ensure_windows_table(model: str, dimension: int) -> None:
    if not windows_exist(model):  # checked first: the lock in _create would make every store wait for another
        _create(vectorstore.windows_table_name(model), "window_id", dimension)


def vectors_insert(model: str, rows: Sequence[tuple[int, int, Sequence[float]]]) -> None:
    _insert(vectorstore.table_name(model), "chunk_id", rows)


def windows_insert(model: str, rows: Sequence[tuple[int, int, Sequence[float]]]) -> None:
    _insert(vectorstore.windows_table_name(model), "window_id", rows)


def _insert(table: str, key: str, rows: Sequence[tuple[int, int, Sequence[float]]]) -> None:
    with connection.cursor() as cur:
        cur.executemany(
            f"INSERT INTO {table} ({key}, collection_id, embedding) VALUES (%s, %s, %s::vector)",
            [(rid, col, literal(vec)) for rid, col, vec in rows],
        )


def vectors_delete(chunk_ids: Sequence[int]) -> None:
    """One statement per table: the chunks' own rows by ``= ANY``, their windows by key range."""
    if not chunk_ids:
        return
    ids = [int(cid) for cid in chunk_ids]
    slots = vectorstore.WINDOW_SLOTS
    with connection.cursor() as cur:
        for table in all_tables():
            cur.execute(f"DELETE FROM {table} WHERE chunk_id = ANY (%s)", [ids])
        for table in all_tables(kind="windows"):
            cur.executemany(
                f"DELETE FROM {table} WHERE window_id > %s AND window_id < %s",
                [(cid * slots, (cid + 1) * slots) for cid in ids],
            )


def all_tables(*, kind: str = "chunks") -> list[str]:
    if kind not in ("chunks", "windows"):
        raise ValueError(f"unknown vector table kind {kind!r}")
    with connection.cursor() as cur:
        cur.execute(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'embedding' "
            "JOIN pg_type t ON t.oid = a.atttypid AND t.typname = 'vector' "
            "WHERE c.relkind = 'r' AND n.nspname = current_schema() AND c.relname LIKE %s "
            "ORDER BY c.relname",
            [f"vec\\_{kind}\\_%"],
        )
        return [row[0] for row in cur.fetchall() if vectorstore._SLUG_OK.match(row[0])]


def source_index_complete(source_id: int, chunk_count: int, model: str) -> bool:
    with connection.cursor() as cur:
        cur.execute("SELECT id FROM sources_chunk WHERE source_id = %s", [source_id])
        ids = [row[0] for row in cur.fetchall()]
        if len(ids) != chunk_count:
            return False
        cur.execute("SELECT count(*) FROM chunks_fts WHERE chunk_id = ANY (%s)", [ids])
        if cur.fetchone()[0] != chunk_count:
            return False
        cur.execute(f"SELECT count(*) FROM {vectorstore.table_name(model)} WHERE chunk_id = ANY (%s)", [ids])
        return bool(cur.fetchone()[0] == chunk_count)


KEYWORD_TRIGGERS = (
    "chunks_fts_chunk",
    "chunks_fts_delete",
    "chunks_fts_truncate",
    "chunks_fts_title",
    "chunks_fts_terms_sync",
    "chunks_fts_terms_truncate",
)


def sqlite_integrity() -> str:
    """Returns "ok" when the triggers that keep the keyword index in step with the chunks are all there, else which
    are missing. PostgreSQL checks its own pages (checksums, when the cluster has them); ``foundry check`` then
    compares the chunk, keyword and vector sets."""
    with connection.cursor() as cur:
        cur.execute(
            "SELECT tgname FROM pg_trigger WHERE NOT tgisinternal AND tgname = ANY (%s)", [list(KEYWORD_TRIGGERS)]
        )
        present = {row[0] for row in cur.fetchall()}
    missing = [name for name in KEYWORD_TRIGGERS if name not in present]
    return "ok" if not missing else "keyword index triggers missing: " + ", ".join(missing)


def fts_integrity() -> str:
    """ "" when BM25's statistics agree with the keyword index (``retrieval/migrations/0012_chunks_fts_terms.py``):
    as many rows counted and as long in all as ``chunks_fts`` holds, and a term row for every lexeme of every row;
    else what differs."""
    with connection.cursor() as cur:
        cur.execute(
            "SELECT (SELECT count(*) FROM chunks_fts), (SELECT coalesce(sum(length), 0) FROM chunks_fts), "
            "(SELECT coalesce(sum(n), 0) FROM chunks_fts_stats), "
            "(SELECT coalesce(sum(total), 0) FROM chunks_fts_stats), "
            "(SELECT coalesce(sum(length(document)), 0) FROM chunks_fts), (SELECT count(*) FROM chunks_fts_terms)"
        )
        rows, total, counted, counted_total, lexemes, terms = cur.fetchone()
    found = [
        f"{what}: {have} in the keyword index, {kept} kept for BM25"
        for what, have, kept in (("rows", rows, counted), ("words", total, counted_total), ("terms", lexemes, terms))
        if have != kept
    ]
    return "; ".join(found)


def fts_rebuild() -> int:
    with connection.cursor() as cur:
        cur.execute("TRUNCATE chunks_fts")  # its trigger empties BM25's statistics too
        cur.execute("SELECT chunks_fts_refresh(ARRAY(SELECT id FROM sources_chunk))")
        cur.execute("SELECT count(*) FROM chunks_fts")
        return int(cur.fetchone()[0])


def page_limit_room() -> int | None:
    """None: a PostgreSQL database has no page limit of its own (the disk's free space is the server's)."""
    return None


def fts_ids() -> set[int]:
    with connection.cursor() as cur:
        cur.execute("SELECT chunk_id FROM chunks_fts")
        return {row[0] for row in cur.fetchall()}
