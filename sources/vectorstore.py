"""The vec0 tables that hold chunk embeddings, two per embedding model.

``vec_chunks_{slug}`` holds one vector per chunk (its whole text), keyed by chunk id.
``vec_windows_{slug}`` holds the vectors of a chunk's sentence windows
(``ingest.window_sentences``), keyed by ``window_id(chunk_id, j)``: a chunk owns the
ids ``chunk_id * WINDOW_SLOTS + 1`` to ``+ WINDOW_SLOTS - 1``, so its windows are
found, counted and deleted by a range of primary keys without a mapping table, and
``unit // WINDOW_SLOTS`` is the chunk of any vector. (Slot 0 is the chunk's own
vector in the dense matrix, ``retrieval/dense.py``.)

Ingest writes vectors in the same transaction as the chunk rows, and ``sources``
may not import ``retrieval``, so the write side of the vector SQL lives here; the
read side (KNN search) is in ``retrieval/search.py``. The table name is the only
SQL built from a value, and that value is a slug checked against ``[a-z0-9_]+``.

On PostgreSQL (``FOUNDRY_DATABASE_URL``) the functions marked ``@_postgres`` run their namesakes in
``sources/vectorstore_postgres.py`` (pgvector tables, the ``tsvector`` keyword index); the others' SQL
is the same on both.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Sequence

from django.db import DatabaseError, connection

from core.db_vendor import postgres_variant
from sources.reingest import StaleEmbeddings

_SLUG_OK = re.compile(r"^[a-z0-9_]+$")
_postgres = postgres_variant("sources.vectorstore_postgres")


class MissingEmbeddings(Exception):
    """The configured embedding model has no vectors in this knowledge base."""

    def __init__(self, model: str) -> None:
        super().__init__(f"No embeddings found for model {model}. Run foundry ingest first.")
        self.model = model


class EmbeddingModelChanged(MissingEmbeddings):
    """Sources were embedded with another model than the configured one, and not re-ingested since.

    ``str(exc)`` names both models but no folder, so it may be shown to any user;
    ``fix`` lists the exact re-ingest commands (for the CLI and the startup check).
    """

    def __init__(self, model: str, stale: list[StaleEmbeddings]) -> None:
        counts: dict[str, int] = {}
        for group in stale:
            counts[group.model] = counts.get(group.model, 0) + group.sources
        built = ", ".join(f"{old} ({n} source{'' if n == 1 else 's'})" for old, n in counts.items())
        self.problem = (
            f"The index was built with embedding model {built}, but foundry.yaml sets "
            f"embedding.model: {model}; those vectors cannot be searched with {model}."
        )
        Exception.__init__(
            self, f"{self.problem} An administrator must re-ingest the sources (`foundry check` prints the commands)."
        )
        self.model = model
        self.stale = stale
        self.old_models = list(counts)

    @property
    def fix(self) -> str:
        commands = list(dict.fromkeys(group.reingest_command for group in self.stale))
        return (
            f"Re-ingest to embed every source with {self.model}:\n"
            + "".join(f"  {command}\n" for command in commands)
            + f"or set embedding.model back to {' or '.join(self.old_models)} in foundry.yaml."
        )


def model_slug(model: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "_", model.lower()).strip("_")
    if not _SLUG_OK.match(slug):
        raise ValueError(f"cannot derive a table name from model {model!r}")
    return slug


def table_name(model: str) -> str:
    return f"vec_chunks_{model_slug(model)}"


WINDOW_SLOTS = 1024  # ids per chunk in the windows table: slot 0 (the chunk) + up to 1023 windows


def windows_table_name(model: str) -> str:
    return f"vec_windows_{model_slug(model)}"


def window_id(chunk_id: int, index: int) -> int:
    """The id of the chunk's window ``index`` (0-based); see the module docstring."""
    if not 0 <= index < WINDOW_SLOTS - 1:
        raise ValueError(f"window index {index} outside 0..{WINDOW_SLOTS - 2}")
    return int(chunk_id) * WINDOW_SLOTS + 1 + index


def serialize(vector: Sequence[float]) -> bytes:
    return struct.pack(f"{len(vector)}f", *vector)


@_postgres
def table_exists(model: str) -> bool:
    return _exists(table_name(model))


@_postgres
def windows_exist(model: str) -> bool:
    return _exists(windows_table_name(model))


@_postgres
def _exists(table: str) -> bool:
    with connection.cursor() as cur:
        cur.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = %s", [table])
        return cur.fetchone() is not None


@_postgres
def table_dimension(model: str) -> int | None:
    """The vector width of the model's table, or None when there is no table."""
    if not table_exists(model):
        return None
    with connection.cursor() as cur:
        cur.execute("SELECT sql FROM sqlite_master WHERE name = %s", [table_name(model)])
        match = re.search(r"float\[(\d+)\]", cur.fetchone()[0])
    return int(match.group(1)) if match else None


def ensure_table(model: str, dimension: int) -> None:
    """Create the model's vector table (cosine distance) if it is missing; a table of another width is refused.

    The width is only known once the model has produced a vector, which is why
    this DDL runs at ingest rather than in a migration.
    """
    existing = table_dimension(model)
    if existing is not None:
        if existing != dimension:
            raise ValueError(
                f"{table_name(model)} holds {existing}-d vectors but {model} returned {dimension}-d; "
                "re-ingest with --rebuild after changing the model"
            )
        return
    table_create(model, dimension)


@_postgres
def table_create(model: str, dimension: int) -> None:
    """Create the model's vec0 table (``ensure_table`` checked that there is none)."""
    with connection.cursor() as cur:
        cur.execute(
            f"CREATE VIRTUAL TABLE IF NOT EXISTS {table_name(model)} USING vec0("
            f"chunk_id integer primary key, collection_id integer, "
            f"embedding float[{int(dimension)}] distance_metric=cosine)"
        )


@_postgres
def ensure_windows_table(model: str, dimension: int) -> None:
    """Create the model's windows table if it is missing (its width follows the chunk table's)."""
    with connection.cursor() as cur:
        cur.execute(
            f"CREATE VIRTUAL TABLE IF NOT EXISTS {windows_table_name(model)} USING vec0("
            f"window_id integer primary key, collection_id integer, "
            f"embedding float[{int(dimension)}] distance_metric=cosine)"
        )


@_postgres
def vectors_insert(model: str, rows: Sequence[tuple[int, int, Sequence[float]]]) -> None:
    """Insert (chunk_id, collection_id, vector) rows; the caller holds the transaction."""
    with connection.cursor() as cur:
        cur.executemany(
            f"INSERT INTO {table_name(model)}(chunk_id, collection_id, embedding) VALUES (%s, %s, %s)",
            [(cid, col, serialize(vec)) for cid, col, vec in rows],
        )


@_postgres
def windows_insert(model: str, rows: Sequence[tuple[int, int, Sequence[float]]]) -> None:
    """Insert (window_id, collection_id, vector) rows; the caller holds the transaction."""
    with connection.cursor() as cur:
        cur.executemany(
            f"INSERT INTO {windows_table_name(model)}(window_id, collection_id, embedding) VALUES (%s, %s, %s)",
            [(wid, col, serialize(vec)) for wid, col, vec in rows],
        )


@_postgres
def vectors_delete(chunk_ids: Sequence[int]) -> None:
    """Delete the vectors and window vectors of these chunks from every model's tables (vec0 has no cascade).

    One statement per id: sqlite-vec 0.1.9 runs ``chunk_id IN (…)`` as a scan of the
    whole table, while ``chunk_id = ?`` is a primary-key lookup. A range of window ids
    is a scan too, so windows go one id at a time: a chunk's windows fill its first
    slots, so its deletes stop at the first slot that held nothing.
    """
    if not chunk_ids:
        return
    with connection.cursor() as cur:
        for table in all_tables():
            cur.executemany(f"DELETE FROM {table} WHERE chunk_id = %s", [(int(cid),) for cid in chunk_ids])
        for table in all_tables(kind="windows"):
            for cid in chunk_ids:
                for index in range(WINDOW_SLOTS - 1):
                    cur.execute(f"DELETE FROM {table} WHERE window_id = %s", [window_id(cid, index)])
                    if cur.rowcount == 0:
                        break


@_postgres
def all_tables(*, kind: str = "chunks") -> list[str]:
    """Every model's vec0 table of chunk vectors (``kind="windows"``: of window vectors)."""
    if kind not in ("chunks", "windows"):
        raise ValueError(f"unknown vector table kind {kind!r}")
    with connection.cursor() as cur:
        cur.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE %s ESCAPE '\\' "
            "AND sql LIKE 'CREATE VIRTUAL TABLE%%'",
            [f"vec\\_{kind}\\_%"],
        )
        return [row[0] for row in cur.fetchall() if _SLUG_OK.match(row[0])]


def vector_count(model: str) -> int:
    return _rows(table_name(model))


def window_count(model: str) -> int:
    return _rows(windows_table_name(model))


def _rows(table: str) -> int:
    if not _exists(table):
        return 0
    with connection.cursor() as cur:
        cur.execute(f"SELECT count(*) FROM {table}")
        return cur.fetchone()[0]


@_postgres
def source_index_complete(source_id: int, chunk_count: int, model: str) -> bool:
    """True when every chunk of the source has its FTS row and its vector (so a skip is safe).

    Runs for every unchanged file of every ingest, so it must not cost a pass over the
    vectors: the chunk ids come from the chunk table's source index, then each vector is
    one primary-key lookup (``chunk_id IN (SELECT …)`` is a scan of the whole vec0 table
    in sqlite-vec 0.1.9, as in ``vectors_delete``). FTS5 answers ``rowid IN (…)`` by rowid.
    """
    with connection.cursor() as cur:
        cur.execute("SELECT id FROM sources_chunk WHERE source_id = %s", [source_id])
        ids = [row[0] for row in cur.fetchall()]
        if len(ids) != chunk_count:
            return False
        cur.execute(
            "SELECT count(*) FROM chunks_fts WHERE rowid IN (SELECT id FROM sources_chunk WHERE source_id = %s)",
            [source_id],
        )
        if cur.fetchone()[0] != chunk_count:
            return False
        for cid in ids:
            cur.execute(f"SELECT 1 FROM {table_name(model)} WHERE chunk_id = %s", [cid])
            if cur.fetchone() is None:
                return False
    return True


def vectors_version(model: str) -> str:
    """A cheap tag that changes whenever the set of stored vectors can have changed.

    Ingest replaces a source's chunks (new chunk ids, never reused: the id column is
    AUTOINCREMENT) and bumps its ``updated_at``; removing a source drops its row. So
    (sources, latest update, highest chunk id) moves on every insert, replacement and
    deletion of vectors, and costs three indexed or small-table aggregates rather
    than a count over millions of vector rows. Used to tell when a derived copy of the
    vectors (``retrieval/dense.py``) is stale.
    """
    with connection.cursor() as cur:
        cur.execute("SELECT count(*), max(updated_at) FROM sources_source")
        sources, latest = cur.fetchone()
        cur.execute("SELECT max(id) FROM sources_chunk")
        top = cur.fetchone()[0]
    return f"{model_slug(model)}:{table_dimension(model)}:{sources}:{latest or '-'}:{top or 0}"


# --------------------------------------------------------------------------- integrity (``foundry check``)


@_postgres
def sqlite_integrity() -> str:
    """SQLite's own ``PRAGMA integrity_check``: "ok", or its findings joined by "; "."""
    with connection.cursor() as cur:
        cur.execute("PRAGMA integrity_check")
        return "; ".join(row[0] for row in cur.fetchall())


@_postgres
def fts_integrity() -> str:
    """FTS5's integrity check: "" when the index agrees with its content, else the error it raised."""
    with connection.cursor() as cur:
        try:
            cur.execute("INSERT INTO chunks_fts(chunks_fts, rank) VALUES ('integrity-check', 1)")
        except DatabaseError as exc:  # FTS5 reports a damaged index by raising, not by returning rows
            return str(exc)
    return ""


@_postgres
def fts_rebuild() -> int:
    """Make the keyword index anew from the chunk rows (``foundry check --repair``); returns its row count.

    FTS5's own ``rebuild`` first mends a damaged index from the text the table stores, so the
    rows can then be deleted; they are filled again from the chunks as migration 0010 does.
    The caller holds the transaction.
    """
    with connection.cursor() as cur:
        cur.execute("INSERT INTO chunks_fts(chunks_fts) VALUES ('rebuild')")
        cur.execute("DELETE FROM chunks_fts")
        cur.execute(
            "INSERT INTO chunks_fts(rowid, text, heading, title, stems) "
            "SELECT c.id, c.text, c.heading, coalesce(s.title, ''), c.stems "
            "FROM sources_chunk c JOIN sources_source s ON s.id = c.source_id"
        )
        return cur.rowcount


def orphans_delete(table: str, ids: Sequence[int]) -> None:
    """Delete rows of one vec0 table (``all_tables``, either kind) by primary key; the caller holds the transaction."""
    key = "window_id" if table in all_tables(kind="windows") else "chunk_id"
    with connection.cursor() as cur:
        cur.executemany(f"DELETE FROM {_checked(table)} WHERE {key} = %s", [(int(i),) for i in ids])


@_postgres
def page_limit_room() -> int | None:
    """Bytes the database may still grow by under this connection's ``PRAGMA max_page_count``
    (sqlite-vec reports a write refused by the limit, or by a full disk, only as its own error);
    None when that cannot be read."""
    try:
        with connection.cursor() as cur:
            values = []
            for pragma in ("max_page_count", "page_count", "page_size"):
                cur.execute(f"PRAGMA {pragma}")
                values.append(int(cur.fetchone()[0]))
    except DatabaseError:
        return None
    limit, pages, size = values
    return (limit - pages) * size


def fts_count() -> int:
    with connection.cursor() as cur:
        cur.execute("SELECT count(*) FROM chunks_fts")
        return cur.fetchone()[0]


def chunk_ids() -> set[int]:
    return _ids("SELECT id FROM sources_chunk")


@_postgres
def fts_ids() -> set[int]:
    return _ids("SELECT rowid FROM chunks_fts")


def vector_ids(table: str) -> set[int]:
    """Chunk ids in one of the vec0 tables ``all_tables()`` names."""
    return _ids(f"SELECT chunk_id FROM {_checked(table)}")


def window_rows(table: str) -> set[int]:
    """The window ids in one of the window tables ``all_tables(kind="windows")`` names."""
    return _ids(f"SELECT window_id FROM {_checked(table)}")


def window_owners(table: str) -> list[int]:
    """The chunk of every row of one of the window tables ``all_tables(kind="windows")`` names."""
    return [window // WINDOW_SLOTS for window in _ids(f"SELECT window_id FROM {_checked(table)}")]


def _checked(table: str) -> str:
    if not _SLUG_OK.match(table):
        raise ValueError(f"not a vector table name: {table!r}")
    return table


def _ids(sql: str) -> set[int]:
    with connection.cursor() as cur:
        cur.execute(sql)
        return {row[0] for row in cur.fetchall()}
