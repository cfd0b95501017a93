"""PostgreSQL's dense search through the HNSW index (``retrieval.search_postgres``): above
``retrieval.dense_exact_max_rows`` vectors the pgvector index answers, with ``hnsw.ef_search`` from
``retrieval.hnsw_ef_search``; on 360 vectors with ef_search 400 it finds what the exact matrix finds."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from django.db import connection

from retrieval import dense
from retrieval.models import ChunkSearch
from sources import vectorstore
from tests.retrieval.test_dense import TINY, _tiny_index

pytestmark = [pytest.mark.postgres_only, pytest.mark.django_db]


def test_the_hnsw_index_answers_above_the_exact_size_and_agrees_with_the_matrix(foundry_config: Any) -> None:
    rng = np.random.default_rng(11)
    alpha, beta, gamma = (c.pk for c in _tiny_index(rng))
    with connection.cursor() as cur:
        cur.execute(f"ANALYZE {vectorstore.table_name(TINY)}")  # the planner's row count decides exact or index
    foundry_config(retrieval={"dense_exact_max_rows": 100, "hnsw_ef_search": 400})
    query = rng.standard_normal(16).astype(np.float32).tolist()
    with connection.cursor() as cur:
        cur.execute("SET LOCAL enable_seqscan = off")  # 360 rows: the planner would rather sort them; test the index
        for scope in (None, [alpha], [beta, gamma]):
            got = ChunkSearch.search.nearest(query, model=TINY, k=10, collection_ids=scope)
            exact = dense.nearest(query, model=TINY, k=10, collection_ids=scope)
            assert [h.chunk_id for h in got] == [h.chunk_id for h in exact], scope
            assert np.allclose([h.score for h in got], [h.score for h in exact], atol=1e-5)
        cur.execute(
            f"EXPLAIN SELECT chunk_id FROM {vectorstore.table_name(TINY)} ORDER BY embedding <=> %s::vector LIMIT 10",
            [str(query)],
        )
        plan = " ".join(row[0] for row in cur.fetchall())
    assert f"{vectorstore.table_name(TINY)}_hnsw" in plan, plan


# BM25 from the keyword index's own rows (every matching tsvector unnested): what ``chunks_fts_terms`` and
# ``chunks_fts_stats`` must give.
_REFERENCE = """
WITH q AS (SELECT DISTINCT lexeme FROM unnest(tsvector_to_array(to_tsvector('english', %s))) AS lexeme),
stats AS (SELECT count(*)::float8 AS n, coalesce(avg(length), 0)::float8 AS avgdl FROM chunks_fts),
hits AS (
    SELECT f.chunk_id, f.length, u.lexeme, coalesce(array_length(u.positions, 1), 1) AS tf
    FROM chunks_fts f, unnest(f.document) AS u WHERE u.lexeme IN (SELECT lexeme FROM q)
), df AS (SELECT lexeme, count(*)::float8 AS n FROM hits GROUP BY lexeme)
SELECT h.chunk_id, sum(greatest(ln((s.n - df.n + 0.5) / (df.n + 0.5)), 1e-6)
    * h.tf * 2.2 / (h.tf + 1.2 * (1 - 0.75 + 0.75 * h.length / greatest(s.avgdl, 1))))
FROM hits h JOIN df USING (lexeme) CROSS JOIN stats s GROUP BY h.chunk_id ORDER BY 2 DESC, 1
"""


def test_bm25_statistics_follow_every_write_to_the_keyword_index() -> None:
    from sources.models import Chunk, Collection, Source

    collection = Collection.objects.create(name="stats")
    source = Source.objects.create(collection=collection, root="/kb", path="a.md", name="a.md", title="Pump manual")
    words = ["pump", "valve", "seal", "impeller", "bearing", "pressure"]
    chunks = [
        Chunk.objects.create(
            source=source, ordinal=i, text=" ".join(words[: i + 1] * (i + 1)), line_start=1, line_end=1, token_count=5
        )
        for i in range(6)
    ]

    def agrees() -> None:
        assert vectorstore.fts_integrity() == ""
        with connection.cursor() as cur:
            cur.execute(_REFERENCE, ["pump seal bearing"])
            expected = [(cid, round(score, 6)) for cid, score in cur.fetchall()]
        got = [(h.chunk_id, round(h.score, 6)) for h in ChunkSearch.search.keyword("pump seal bearing", limit=20)]
        assert got == expected and got

    agrees()
    chunks[0].text = "bearing bearing seal"
    chunks[0].save()
    source.title = "Seal manual"  # every chunk of the source is indexed anew with its title
    source.save()
    agrees()
    chunks[3].delete()
    agrees()
    with connection.cursor() as cur:
        cur.execute("UPDATE chunks_fts_stats SET n = n + 1 WHERE slot = 0")  # damage: found, then repaired
    assert "rows" in vectorstore.fts_integrity()
    vectorstore.fts_rebuild()
    agrees()
    with connection.cursor() as cur:
        cur.execute("SET CONSTRAINTS ALL IMMEDIATE")
        cur.execute("TRUNCATE chunks_fts")  # as Django's flush truncates the chunks (and they, this)
        cur.execute("SELECT coalesce(sum(n), 0), (SELECT count(*) FROM chunks_fts_terms) FROM chunks_fts_stats")
        assert cur.fetchone() == (0, 0)
