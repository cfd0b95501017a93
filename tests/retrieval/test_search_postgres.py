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
