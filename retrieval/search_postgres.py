"""``ChunkSearchManager`` on PostgreSQL: BM25 over the ``tsvector`` keyword index, cosine KNN over pgvector.

Each function stands in for the manager method of the same name (``core.db_vendor.postgres_variant``),
with the same arguments and results.

Keyword search reads the same query terms as the FTS5 path (``search.query_terms``: the question's
topical words, stop words of its language dropped), bound as one parameter. PostgreSQL stems them as
FTS5 does: in English (FTS5's ``porter`` reads every column), and also in the question's own language
when that is another (FTS5's ``stems`` column); a chunk's ``tsvector`` is stemmed in the chunk's language
(``retrieval/migrations/0010_chunks_fts_stems.py``). PostgreSQL has no BM25, and ``ts_rank`` has no IDF,
so the score is FTS5's own ``bm25()`` formula computed in SQL: k1 = 1.2, b = 0.75, the IDF
``ln((N - n + 0.5) / (n + 0.5))`` floored at 1e-6, term frequency from the lexeme's positions and the
length from the row's word count; text, heading and title weigh the same, as FTS5's ``bm25()`` without
weights weighs its columns. A scoped search ranks inside the scope with the whole index's statistics,
as FTS5 does.

Dense search: ``ORDER BY embedding <=> query`` uses the HNSW index with ``hnsw.ef_search`` from
``retrieval.hnsw_ef_search``, and pgvector's iterative scan so a collection filter still fills ``k``;
a table of at most ``retrieval.dense_exact_max_rows`` vectors is scanned exactly instead.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
from django.conf import settings
from django.db import connection, transaction

from core import language
from retrieval.fusion import Hit
from sources import vectorstore
from sources.vectorstore_postgres import as_bytes, literal

K1, B, IDF_FLOOR = 1.2, 0.75, 1e-6  # FTS5's bm25() constants

# The query's lexemes (English stems, and the question language's; words as the index reads them); per lexeme
# the chunks holding it with its count there and the chunk's length (``chunks_fts_terms``, one index range per
# lexeme: retrieval/migrations/0012_chunks_fts_terms.py); BM25 over them, with N and the mean length of the whole
# index (``chunks_fts_stats``).
_LEXEMES = """
WITH words AS (
    SELECT regexp_replace(%(terms)s, '[^[:alnum:]]+', ' ', 'g') AS text
), q AS (
    SELECT DISTINCT lexeme FROM words, unnest(tsvector_to_array(
        to_tsvector('english', words.text) || to_tsvector(%(config)s::regconfig, words.text))) AS lexeme
)"""
_STATS = "SELECT coalesce(sum(n), 0)::float8 AS n, coalesce(sum(total), 0)::float8 AS total FROM chunks_fts_stats"
_BM25 = f"""{_LEXEMES}, stats AS (
    SELECT n, CASE WHEN n > 0 THEN total / n ELSE 0 END AS avgdl FROM ({_STATS}) counted
), hits AS (
    SELECT t.chunk_id, t.length, t.lexeme, t.tf FROM q JOIN chunks_fts_terms t ON t.lexeme = q.lexeme
), df AS (
    SELECT lexeme, count(*)::float8 AS n FROM hits GROUP BY lexeme
)
SELECT h.chunk_id,
       sum(greatest(ln((s.n - df.n + 0.5) / (df.n + 0.5)), {IDF_FLOOR})
           * h.tf * {K1 + 1} / (h.tf + {K1} * (1 - {B} + {B} * h.length / greatest(s.avgdl, 1)))) AS score
FROM hits h JOIN df USING (lexeme) CROSS JOIN stats s
WHERE %(scoped)s = 0 OR h.chunk_id IN (
    SELECT c.id FROM sources_chunk c JOIN sources_source s2 ON s2.id = c.source_id
    WHERE s2.collection_id = ANY (%(collections)s))
GROUP BY h.chunk_id ORDER BY score DESC, h.chunk_id LIMIT %(limit)s
"""


# The chunks holding a term as the index stems it (in English or the question's language); 0 for a term with no
# lexeme (a stop word of both).
_TERM_CHUNKS = f"""{_LEXEMES}
SELECT count(DISTINCT t.chunk_id) FROM q JOIN chunks_fts_terms t ON t.lexeme = q.lexeme
"""


def rare_terms(
    cursor, terms: Sequence[str], max_df: float, max_postings: float = 64, *, code: str | None = None
) -> list[str]:
    """``search.rare_terms`` on PostgreSQL: the same choice, each term's chunk count read from
    ``chunks_fts_terms`` (one count per term) and the number of chunks from ``chunks_fts_stats``."""
    from retrieval import search

    if len(terms) < 2 or (max_df >= 1 and max_postings >= len(terms)):
        return list(terms)
    cursor.execute(_STATS)
    total = int(cursor.fetchone()[0])
    limit, room = (max(share * total, search.PRUNE_FLOOR) for share in (max_df, max_postings))
    if total <= limit and total * len(terms) <= room:
        return list(terms)
    config = language.text_search_config(code or language.detect(" ".join(terms)))
    counts: dict[int, int] = {}
    for index, term in enumerate(terms):
        cursor.execute(_TERM_CHUNKS, {"terms": term, "config": config})
        counts[index] = int(cursor.fetchone()[0])
    return search.rarest_kept(terms, counts, limit, room)


def _collections(collection_ids: Sequence[int] | None) -> dict[str, Any]:
    return {"scoped": 0 if collection_ids is None else 1, "collections": [int(i) for i in collection_ids or []]}


def keyword(
    text: str,
    *,
    limit: int = 20,
    collection_ids: Sequence[int] | None = None,
    max_df: float = 1.0,
    max_postings: float = 64,
) -> list[Hit]:
    """BM25 hits, best first (``score`` higher is better); common terms left out as ``rare_terms`` says."""
    from retrieval.search import query_terms

    if collection_ids is not None and not collection_ids:
        return []
    code = language.detect(text)
    with connection.cursor() as cur:
        terms = rare_terms(cur, query_terms(text, code), max_df, max_postings, code=code)
    if not terms:
        return []
    params: dict[str, Any] = {
        "terms": " ".join(terms),
        "config": language.text_search_config(code),
        "limit": limit,
        **_collections(collection_ids),
    }
    with connection.cursor() as cur:
        cur.execute(_BM25, params)
        return [Hit(cid, float(score)) for cid, score in cur.fetchall()]


def holds(word: str, *, collection_ids: Sequence[int] | None = None) -> bool:
    """Whether a chunk in scope holds ``word`` as a phrase in any supported language's reading of it, or as
    written (a chunk is stemmed in its own language)."""
    if collection_ids is not None and not collection_ids:
        return False
    configs = [language.text_search_config(code) for code in language.SUPPORTED] + [language.TEXT_SEARCH_FALLBACK]
    query = " || ".join(["phraseto_tsquery(%s::regconfig, %s)"] * len(configs))
    bound: list[Any] = [value for config in configs for value in (config, word)]
    scope = ""
    if collection_ids is not None:
        scope = (
            " AND f.chunk_id IN (SELECT c.id FROM sources_chunk c JOIN sources_source s ON s.id = c.source_id "
            "WHERE s.collection_id = ANY (%s))"
        )
        bound.append([int(i) for i in collection_ids])
    with connection.cursor() as cur:
        cur.execute(f"SELECT 1 FROM chunks_fts f WHERE f.document @@ ({query}){scope} LIMIT 1", bound)
        return cur.fetchone() is not None


def _knn(cur, table: str, key: str, vector: str, k: int, collection_ids: Sequence[int] | None) -> list[tuple]:
    """(key, cosine distance) of the ``k`` nearest rows, nearest first: exact up to ``dense_exact_max_rows``
    rows (the planner's count; a table never analysed counts as small), else through the HNSW index.

    The planner settings are ``SET LOCAL`` inside a savepoint that is rolled back once the rows are read, so
    they never outlive this query, also inside a caller's longer transaction. Call inside ``atomic()``."""
    conf = settings.FOUNDRY.retrieval
    cur.execute("SELECT reltuples FROM pg_class WHERE oid = to_regclass(%s)", [table])
    exact = cur.fetchone()[0] <= conf.dense_exact_max_rows
    where, scope = "", []
    if collection_ids is not None:
        where, scope = " WHERE collection_id = ANY (%s)", [[int(i) for i in collection_ids]]
    savepoint = transaction.savepoint()
    try:
        if exact:
            cur.execute("SET LOCAL enable_indexscan = off")
        else:
            cur.execute("SELECT set_config('hnsw.ef_search', %s, true)", [str(conf.hnsw_ef_search)])
            cur.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
        # relaxed_order may return rows slightly out of order; the outer ORDER BY puts them back.
        cur.execute(
            f"SELECT {key}, distance FROM (SELECT {key}, embedding <=> %s::vector AS distance FROM {table}{where} "
            "ORDER BY distance LIMIT %s) nearest ORDER BY distance",
            [vector, *scope, k],
        )
        return cur.fetchall()
    finally:
        transaction.savepoint_rollback(savepoint)


def nearest(
    vector: Sequence[float], *, model: str, k: int = 20, collection_ids: Sequence[int] | None = None
) -> list[Hit]:
    """Nearest chunks by cosine similarity (``score`` = 1 - cosine distance), best first; a chunk scores the
    best of its own vector and its windows'."""
    from retrieval.search import WINDOW_FETCH

    if not vectorstore.table_exists(model):
        raise vectorstore.MissingEmbeddings(model)
    if collection_ids is not None and not collection_ids:
        return []
    query = literal(vector)
    slots = vectorstore.WINDOW_SLOTS
    with transaction.atomic(), connection.cursor() as cur:
        units = _knn(cur, vectorstore.table_name(model), "chunk_id", query, k, collection_ids)
        if vectorstore.windows_exist(model):
            table = vectorstore.windows_table_name(model)
            windows = _knn(cur, table, "window_id", query, k * WINDOW_FETCH, collection_ids)
            units += [(wid // slots, dist) for wid, dist in windows]
    best: dict[int, float] = {}
    for cid, dist in units:
        best[cid] = max(best.get(cid, -2.0), 1.0 - float(dist))
    return sorted((Hit(cid, score) for cid, score in best.items()), key=lambda h: (-h.score, h.chunk_id))[:k]


def vector_batches(
    *, model: str, after: int = 0, ids: np.ndarray | None = None, size: int = 20_000
) -> Iterator[list[tuple[int, int | None, bytes]]]:
    """Every stored (unit id, collection_id, float32 vector bytes) above unit id ``after``, or of the unit ids
    ``ids``, in batches; each table is read by one statement through a server-side cursor (one snapshot)."""
    if not vectorstore.table_exists(model):
        raise vectorstore.MissingEmbeddings(model)
    slots = vectorstore.WINDOW_SLOTS
    chunks, windows = vectorstore.table_name(model), vectorstore.windows_table_name(model)
    has_windows = vectorstore.windows_exist(model)
    statements: list[tuple[str, list[Any]]]
    if ids is not None:
        units = ids.tolist()
        statements = [
            (
                f"SELECT chunk_id * {slots}, collection_id, embedding::real[] FROM {chunks} "
                "WHERE chunk_id = ANY (%s) ORDER BY chunk_id",
                [[u // slots for u in units if u % slots == 0]],
            )
        ]
        if has_windows:
            statements.append(
                (
                    f"SELECT window_id, collection_id, embedding::real[] FROM {windows} "
                    "WHERE window_id = ANY (%s) ORDER BY window_id",
                    [[u for u in units if u % slots]],
                )
            )
    else:
        statements = [
            (
                f"SELECT chunk_id * {slots}, collection_id, embedding::real[] FROM {chunks} WHERE chunk_id > %s",
                [after // slots],
            )
        ]
        if has_windows:
            statements.append(
                (f"SELECT window_id, collection_id, embedding::real[] FROM {windows} WHERE window_id > %s", [after])
            )
    for sql, bound in statements:
        with transaction.atomic(), connection.chunked_cursor() as cur:
            cur.execute(sql, bound)
            while rows := cur.fetchmany(size):
                yield [(unit, collection, as_bytes(values)) for unit, collection, values in rows]


def _unit_statements(model: str, column: str, after: int | None) -> list[tuple[str, list[int]]]:
    if not vectorstore.table_exists(model):
        raise vectorstore.MissingEmbeddings(model)
    slots = vectorstore.WINDOW_SLOTS
    chunk_column = column.format(f"chunk_id * {slots}")
    statements = [
        (
            f"SELECT {chunk_column} FROM {vectorstore.table_name(model)}"
            + ("" if after is None else " WHERE chunk_id > %s"),
            [] if after is None else [after // slots],
        )
    ]
    if vectorstore.windows_exist(model):
        statements.append(
            (
                f"SELECT {column.format('window_id')} FROM {vectorstore.windows_table_name(model)}"
                + ("" if after is None else " WHERE window_id > %s"),
                [] if after is None else [after],
            )
        )
    return statements


def unit_ids(*, model: str, after: int = 0) -> np.ndarray:
    """Every stored unit id above ``after`` (an index-only scan of each table's key)."""
    ids = [np.zeros(0, np.int64)]
    with connection.cursor() as cur:
        for sql, bound in _unit_statements(model, "{}", after):
            cur.execute(sql, bound)
            ids.append(np.array([row[0] for row in cur.fetchall()], dtype=np.int64))
    return np.concatenate(ids)


def unit_count(*, model: str) -> int:
    total = 0
    with connection.cursor() as cur:
        for sql, bound in _unit_statements(model, "count(*)", None):
            cur.execute(sql, bound)
            total += int(cur.fetchone()[0])
    return total


def similarity(vector: Sequence[float], chunk_ids: Sequence[int], *, model: str) -> dict[int, float]:
    """Cosine similarity of ``vector`` to each of ``chunk_ids`` that has a vector (one statement)."""
    with connection.cursor() as cur:
        cur.execute(
            f"SELECT chunk_id, embedding <=> %s::vector FROM {vectorstore.table_name(model)} WHERE chunk_id = ANY (%s)",
            [literal(vector), [int(c) for c in dict.fromkeys(chunk_ids)]],
        )
        found = {cid: 1.0 - float(distance) for cid, distance in cur.fetchall()}
    return {cid: found[cid] for cid in dict.fromkeys(chunk_ids) if cid in found}


def vectors(chunk_ids: Sequence[int], *, model: str) -> dict[int, bytes]:
    """Stored float32 vectors of ``chunk_ids`` (raw bytes)."""
    with connection.cursor() as cur:
        cur.execute(
            f"SELECT chunk_id, embedding::real[] FROM {vectorstore.table_name(model)} WHERE chunk_id = ANY (%s)",
            [[int(c) for c in dict.fromkeys(chunk_ids)]],
        )
        found = {cid: as_bytes(values) for cid, values in cur.fetchall()}
    return {cid: found[cid] for cid in dict.fromkeys(chunk_ids) if cid in found}
