"""Raw-SQL search over chunks: FTS5 (BM25) and sqlite-vec (cosine), plus rank fusion.

User text reaches ``MATCH`` only through ``match_expression`` (every term quoted,
bound as a parameter). Table names are constants, except ``vec_chunks_{slug}``, whose
slug ``sources.vectorstore`` derives from configuration and checks.

On PostgreSQL (``FOUNDRY_DATABASE_URL``) every ``ChunkSearchManager`` method runs its namesake in
``retrieval/search_postgres.py`` (BM25 over the ``tsvector`` index, pgvector KNN) with the same results.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

import numpy as np
from django.db import connection, models

from core import language
from core.db_vendor import postgres_variant
from retrieval.fusion import Hit
from sources import vectorstore

MAX_QUERY_TERMS = 64
TOKENIZER = "porter unicode61 remove_diacritics 2"  # chunks_fts's (retrieval/migrations/0001_chunks_fts.py)
PRUNE_FLOOR = 10_000  # rare_terms keeps terms found in this many chunks or fewer (a few ms to score)
NO_POSTINGS_CAP = MAX_QUERY_TERMS  # max_postings that keeps every term: each is in at most every chunk
SCOPE_OVERFETCH = 4  # a scoped keyword search first takes 4x its limit from the whole index
WINDOW_FETCH = 8  # vec0 nearest(): windows fetched per chunk asked for (a chunk has ~3 on average)
VEC0_MAX_K = 4096  # the largest k sqlite-vec 0.1.9 accepts
_TERM = re.compile(r"\w+", re.UNICODE)


def query_terms(text: str, code: str | None = None) -> list[str]:
    """The distinct topical words of ``text`` (lower case, the stop words of its language ``code`` dropped; detected
    when not given), at most 64."""
    stop_words = language.analyzer(code or language.detect(text)).stop_words
    seen: dict[str, None] = {}
    for term in _TERM.findall(text.lower()):
        if term not in stop_words and term not in seen:
            seen[term] = None
        if len(seen) >= MAX_QUERY_TERMS:
            break
    return list(seen)


def match_expression(terms: Sequence[str]) -> str:
    """An FTS5 query matching any of ``terms``; "" when there is none.

    Every term is wrapped in double quotes (embedded quotes doubled), so FTS5
    operators, column filters and punctuation in user text are plain words.
    """
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)


def fts_query(text: str) -> str:
    """An FTS5 query matching any topical term of ``text``; "" when there is none."""
    code = language.detect(text)
    return keyword_expression(query_terms(text, code), code)


def keyword_expression(terms: Sequence[str], code: str) -> str:
    """An FTS5 query matching any of ``terms`` as written, or, in a language the index's tokenizer does not stem
    (``language.PORTER_STEMMED``), any of their stems in that language in the ``stems`` column; "" for no terms."""
    written = match_expression(terms)
    if not written or code in language.PORTER_STEMMED:
        return written
    analyzer = language.analyzer(code)
    stems = list(dict.fromkeys(stem for term in terms for stem in analyzer.stems(term)))
    if not stems:
        return written
    return f"{{text heading title}} : ({written}) OR stems : ({match_expression(stems)})"


@postgres_variant("retrieval.search_postgres")
def rare_terms(cursor, terms: Sequence[str], max_df: float, max_postings: float = NO_POSTINGS_CAP) -> list[str]:
    """The ``terms`` a pruned keyword search keeps, in their order.

    Rarest first, terms are kept while each is found in at most ``max_df`` of all chunks and their
    chunk counts add up to at most ``max_postings`` times the number of chunks; the rarest term
    found at all is always kept, and terms found nowhere cost nothing and stay. Either limit is
    at least ``PRUNE_FLOOR`` chunks, so a small index keeps every term.

    FTS5 scores every chunk holding any query term, ~1 µs a chunk at 1M chunks, with no early
    termination; a word found in a large share of a large index costs most of a keyword search
    while its IDF adds little to the ranking, and a long question of mid-frequency words
    together match a large share too (docs/decisions.md; docs/benchmarks.md, "Scale"). A term's chunk
    count is read for the stem(s) the index stores: the terms are tokenized by a
    connection-local FTS5 table with the index's own tokenizer, and counted in an fts5vocab
    view of the index.
    """
    if len(terms) < 2 or (max_df >= 1 and max_postings >= len(terms)):
        return list(terms)
    cursor.execute("SELECT block FROM chunks_fts_data WHERE id = 1")  # FTS5's averages record
    row = cursor.fetchone()
    total = _varint(row[0]) if row else 0
    limit, room = (max(share * total, PRUNE_FLOOR) for share in (max_df, max_postings))
    if total <= limit and total * len(terms) <= room:
        return list(terms)
    return rarest_kept(terms, _term_chunks(cursor, terms), limit, room)


def _term_chunks(cursor, terms: Sequence[str]) -> dict[int, int]:
    """How many chunks hold each of ``terms`` (by its index), as the index stems it."""
    for ddl in (
        f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.query_terms USING fts5(term, tokenize = '{TOKENIZER}')",
        "CREATE VIRTUAL TABLE IF NOT EXISTS temp.query_stems USING fts5vocab(temp, query_terms, 'instance')",
        "CREATE VIRTUAL TABLE IF NOT EXISTS temp.chunk_terms USING fts5vocab(main, chunks_fts, 'row')",
    ):
        cursor.execute(ddl)
    cursor.execute("DELETE FROM temp.query_terms")
    cursor.executemany("INSERT INTO temp.query_terms(rowid, term) VALUES (%s, %s)", list(enumerate(terms)))
    cursor.execute(
        "SELECT s.doc, max(coalesce(c.doc, 0)) FROM temp.query_stems s "
        "LEFT JOIN temp.chunk_terms c ON c.term = s.term GROUP BY s.doc"
    )
    return dict(cursor.fetchall())


def rarest_kept(terms: Sequence[str], chunks_with: dict[int, int], limit: float, room: float) -> list[str]:
    """``rare_terms``'s choice, given each term's chunk count (by index; absent: 0) and the two limits in chunks."""
    rarest_first = sorted((chunks_with.get(i, 0), i) for i in range(len(terms)))
    kept, used = set(), 0
    for count, index in rarest_first:
        if used and (count > limit or used + count > room):
            break
        kept.add(index)
        used += count
    return [term for index, term in enumerate(terms) if index in kept]


def _varint(data: bytes) -> int:
    """An SQLite varint (big-endian, 7 bits a byte, the 9th byte whole) at the start of ``data``."""
    value = 0
    for index, byte in enumerate(data[:9]):
        if index == 8:
            return (value << 8) | byte
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            return value
    return value


def _scope(collection_ids: Sequence[int] | None, column: str) -> tuple[str, list[int]]:
    if collection_ids is None:
        return "", []
    if not collection_ids:
        return " AND 0", []
    return f" AND {column} IN ({','.join(['%s'] * len(collection_ids))})", [int(i) for i in collection_ids]


_postgres = postgres_variant("retrieval.search_postgres", method=True)


class ChunkSearchManager(models.Manager):
    @_postgres
    def keyword(
        self,
        text: str,
        *,
        limit: int = 20,
        collection_ids: Sequence[int] | None = None,
        max_df: float = 1.0,
        max_postings: float = NO_POSTINGS_CAP,
    ) -> list[Hit]:
        """BM25 hits, best first; ``score`` is -bm25 (higher is better).

        Common terms are left out as ``rare_terms`` says (``max_df``, ``max_postings``).
        A scoped search filters the unscoped ranking (BM25 statistics are the whole index's
        either way, so the order is the same) and ranks inside the scope by a join only when
        the scope holds too few of the best matches.
        """
        if collection_ids is not None and not collection_ids:
            return []
        with connection.cursor() as cur:
            code = language.detect(text)
            query = keyword_expression(rare_terms(cur, query_terms(text, code), max_df, max_postings), code)
            if not query:
                return []
            fetch = limit if collection_ids is None else limit * SCOPE_OVERFETCH
            cur.execute(
                "SELECT rowid, bm25(chunks_fts) FROM chunks_fts WHERE chunks_fts MATCH %s ORDER BY 2 LIMIT %s",
                [query, fetch],
            )
            ranked = [Hit(cid, -score) for cid, score in cur.fetchall()]
            if collection_ids is None or not ranked:
                return ranked
            where, params = _scope(collection_ids, "s.collection_id")
            cur.execute(
                "SELECT c.id FROM sources_chunk c JOIN sources_source s ON s.id = c.source_id "
                f"WHERE c.id IN ({','.join(['%s'] * len(ranked))}){where}",
                [h.chunk_id for h in ranked] + params,
            )
            inside = {cid for (cid,) in cur.fetchall()}
            hits = [h for h in ranked if h.chunk_id in inside][:limit]
            if len(hits) == limit or len(ranked) < fetch:
                return hits
            cur.execute(
                "SELECT f.rowid, bm25(chunks_fts) FROM chunks_fts f "
                "JOIN sources_chunk c ON c.id = f.rowid JOIN sources_source s ON s.id = c.source_id "
                f"WHERE chunks_fts MATCH %s{where} ORDER BY 2 LIMIT %s",
                [query, *params, limit],
            )
            return [Hit(cid, -score) for cid, score in cur.fetchall()]

    @_postgres
    def holds(self, word: str, *, collection_ids: Sequence[int] | None = None) -> bool:
        """Whether a chunk of the collections ``collection_ids`` (None: every collection) holds ``word``, in its
        text, heading path or title, as the keyword index reads it (its stem; "PX-100" as the phrase "ax 200")."""
        if collection_ids is not None and not collection_ids:
            return False
        query = match_expression([word])
        where, params = _scope(collection_ids, "s.collection_id")
        # CROSS JOIN keeps the index's matches the outer loop, so the look-up stops at the first one in scope;
        # SQLite would otherwise run the match once per chunk of the scope
        join = (
            " CROSS JOIN sources_chunk c ON c.id = f.rowid CROSS JOIN sources_source s ON s.id = c.source_id"
            if where
            else ""
        )
        with connection.cursor() as cur:
            cur.execute(f"SELECT 1 FROM chunks_fts f{join} WHERE chunks_fts MATCH %s{where} LIMIT 1", [query, *params])
            return cur.fetchone() is not None

    @_postgres
    def nearest(
        self, vector: Sequence[float], *, model: str, k: int = 20, collection_ids: Sequence[int] | None = None
    ) -> list[Hit]:
        """Nearest chunks by cosine similarity (``score`` = 1 - cosine distance), best first.

        A chunk scores the best of its own vector and its windows' (``vectorstore``). The
        windows' KNN fetches ``WINDOW_FETCH`` times ``k`` windows, so a chunk found only by a
        window below that depth is missed; ``retrieval/dense.py`` (the default) is exact.
        """
        if not vectorstore.table_exists(model):
            raise vectorstore.MissingEmbeddings(model)
        if collection_ids is not None and not collection_ids:
            return []
        where, params = _scope(collection_ids, "collection_id")
        blob = vectorstore.serialize(vector)
        best: dict[int, float] = {}
        with connection.cursor() as cur:
            cur.execute(
                f"SELECT chunk_id, distance FROM {vectorstore.table_name(model)} "
                f"WHERE embedding MATCH %s AND k = %s{where}",
                [blob, k, *params],
            )
            units = cur.fetchall()
            if vectorstore.windows_exist(model):
                cur.execute(
                    f"SELECT window_id / {vectorstore.WINDOW_SLOTS}, distance FROM "
                    f"{vectorstore.windows_table_name(model)} WHERE embedding MATCH %s AND k = %s{where}",
                    [blob, min(k * WINDOW_FETCH, VEC0_MAX_K), *params],
                )
                units += cur.fetchall()
        for cid, dist in units:
            best[cid] = max(best.get(cid, -2.0), 1.0 - dist)
        return sorted((Hit(cid, score) for cid, score in best.items()), key=lambda h: (-h.score, h.chunk_id))[:k]

    @_postgres
    def vector_batches(
        self, *, model: str, after: int = 0, ids: np.ndarray | None = None, size: int = 20_000
    ) -> Iterator[list[tuple[int, int | None, bytes]]]:
        """Every stored (unit id, collection_id, float32 vector bytes) above unit id ``after``, or
        of the unit ids ``ids`` (those vec0 holds), in batches. A chunk's own vector has the unit id
        ``chunk_id * WINDOW_SLOTS``, a window its window id (``sources/vectorstore.py``).

        Above ``after``: one statement per table, each reading one consistent snapshot (WAL)
        however long the caller takes between batches; the caller checks ``vectors_version``
        around the read. vec0 filters on its primary key by stepping through every row (~0.3 µs
        a row, in C), and reads a row's vector only for the rows it returns. ``ids``: one
        primary-key lookup each (14 µs for a chunk's vector, 145 µs for a window's, at 4M rows),
        cheaper for a few rows of a large table. For building the dense matrix (``retrieval/dense.py``).
        """
        if not vectorstore.table_exists(model):
            raise vectorstore.MissingEmbeddings(model)
        slots = vectorstore.WINDOW_SLOTS
        chunks, windows = vectorstore.table_name(model), vectorstore.windows_table_name(model)
        with connection.cursor() as cur:
            if ids is not None:
                for start in range(0, len(ids), size):
                    batch = []
                    for unit in ids[start : start + size].tolist():
                        if unit % slots:
                            cur.execute(f"SELECT collection_id, embedding FROM {windows} WHERE window_id = %s", [unit])
                        else:
                            cur.execute(
                                f"SELECT collection_id, embedding FROM {chunks} WHERE chunk_id = %s", [unit // slots]
                            )
                        batch += [(unit, *row) for row in cur.fetchall()]
                    yield batch
                return
            statements = [
                f"SELECT chunk_id * {slots}, collection_id, embedding FROM {chunks} WHERE chunk_id * {slots} > %s"
            ]
            if vectorstore.windows_exist(model):
                statements.append(f"SELECT window_id, collection_id, embedding FROM {windows} WHERE window_id > %s")
            for sql in statements:
                cur.execute(sql, [after])
                while rows := cur.fetchmany(size):
                    yield rows

    @_postgres
    def unit_ids(self, *, model: str, after: int = 0) -> np.ndarray:
        """Every stored unit id (as ``vector_batches`` numbers them) above ``after``, in no particular order.

        Read from sqlite-vec's ``<table>_rowids`` shadow table, which holds one row per stored
        vector keyed by its primary key (sqlite-vec 0.1, pinned; ``tests/retrieval/test_dense.py``
        checks it against vec0 after inserts and deletions), joined into one text by SQLite: 0.6 s
        for 3M ids, where stepping through vec0 takes 1.4 s and fetching its ids into Python 2.5 s.
        Ids above ``after`` are a range of that table's key: as fast as there are few.
        """
        slots = vectorstore.WINDOW_SLOTS
        ids = [np.zeros(0, np.int64)]
        with connection.cursor() as cur:
            for sql, bound in self._unit_tables(model, f"group_concat(rowid * {slots})", "group_concat(rowid)", after):
                cur.execute(sql, bound)
                if text := cur.fetchone()[0]:
                    ids.append(np.array(text.split(","), dtype=np.int64))
        return np.concatenate(ids)

    @_postgres
    def unit_count(self, *, model: str) -> int:
        """How many unit ids ``unit_ids`` returns, counted in the same shadow tables (20 ms for 4M)."""
        total = 0
        with connection.cursor() as cur:
            for sql, bound in self._unit_tables(model, "count(*)", "count(*)", None):
                cur.execute(sql, bound)
                total += cur.fetchone()[0]
        return total

    @staticmethod
    def _unit_tables(
        model: str, chunk_column: str, window_column: str, after: int | None
    ) -> list[tuple[str, list[int]]]:
        """(statement, parameters) reading ``chunk_column`` / ``window_column`` of each row-id table,
        over the unit ids above ``after`` (None: every one, which lets ``count(*)`` use the b-tree's count)."""
        if not vectorstore.table_exists(model):
            raise vectorstore.MissingEmbeddings(model)
        tables = [(vectorstore.table_name(model), chunk_column, vectorstore.WINDOW_SLOTS)]
        if vectorstore.windows_exist(model):
            tables.append((vectorstore.windows_table_name(model), window_column, 1))
        return [
            (
                f"SELECT {column} FROM {table}_rowids" + ("" if after is None else " WHERE rowid > %s"),
                [] if after is None else [after // per_row],
            )
            for table, column, per_row in tables
        ]

    @_postgres
    def similarity(self, vector: Sequence[float], chunk_ids: Sequence[int], *, model: str) -> dict[int, float]:
        """Cosine similarity of ``vector`` to each of ``chunk_ids`` (for the gate and the Sources list).

        One primary-key lookup per id: sqlite-vec 0.1.9 answers ``chunk_id IN (...)``
        with a scan of the whole table (~1 s per query at 1M vectors), while a
        ``chunk_id = ?`` lookup takes well under a millisecond at any size.
        """
        blob = vectorstore.serialize(vector)
        sql = f"SELECT vec_distance_cosine(embedding, %s) FROM {vectorstore.table_name(model)} WHERE chunk_id = %s"
        found: dict[int, float] = {}
        with connection.cursor() as cur:
            for cid in dict.fromkeys(chunk_ids):
                cur.execute(sql, [blob, cid])
                row = cur.fetchone()
                if row is not None:
                    found[cid] = 1.0 - row[0]
        return found

    @_postgres
    def vectors(self, chunk_ids: Sequence[int], *, model: str) -> dict[int, bytes]:
        """Stored float32 vectors of ``chunk_ids`` (raw bytes); point lookups, as in ``similarity``."""
        sql = f"SELECT embedding FROM {vectorstore.table_name(model)} WHERE chunk_id = %s"
        found: dict[int, bytes] = {}
        with connection.cursor() as cur:
            for cid in dict.fromkeys(chunk_ids):
                cur.execute(sql, [cid])
                row = cur.fetchone()
                if row is not None:
                    found[cid] = bytes(row[0])
        return found
