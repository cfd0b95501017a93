from __future__ import annotations

from pathlib import Path

import pytest

from retrieval.models import ChunkSearch
from retrieval.search import Hit, fts_query, reciprocal_rank_fusion
from sources.models import Chunk, Collection
from sources.services.ingest import knowledge_base_ingest


def test_rrf_matches_formula() -> None:
    fused = reciprocal_rank_fusion({"dense": [Hit(1, 0.9), Hit(2, 0.8)], "bm25": [Hit(2, 5.0), Hit(3, 4.0)]}, k=60)
    scores = {h.chunk_id: h.score for h in fused}
    assert scores[2] == pytest.approx(1 / 62 + 1 / 61)
    assert scores[1] == pytest.approx(1 / 61)
    assert scores[3] == pytest.approx(1 / 62)
    assert [h.chunk_id for h in fused] == [2, 1, 3]


def test_rrf_weights_and_ties_are_deterministic() -> None:
    fused = reciprocal_rank_fusion({"dense": [Hit(5, 1)], "bm25": [Hit(4, 1)]}, k=60)
    assert [h.chunk_id for h in fused] == [4, 5]
    weighted = reciprocal_rank_fusion({"dense": [Hit(5, 1)], "bm25": [Hit(4, 1)]}, k=60, weights={"dense": 2.0})
    assert weighted[0].chunk_id == 5


@pytest.mark.parametrize("hostile", [
    'NEAR(a b) OR "x" AND NOT y*', "title:secret", "'; DROP TABLE sources_chunk; --", 'a "quoted" word',
    "^start + col:* {a b}", "\x00null\x00", "🙂 emoji ✓", "مرحبا بالعالم", "", "   ", "the of and",
])
def test_fts_query_quotes_everything(hostile: str) -> None:
    query = fts_query(hostile)
    for term in filter(None, query.split(" OR ")):
        assert term.startswith('"') and term.endswith('"')


@pytest.mark.django_db
@pytest.mark.parametrize("hostile", [
    'NEAR(pump valve) OR "x" AND NOT y*', "text:pump", "'; DROP TABLE sources_chunk; --", 'pump "quoted"',
    "^pump + col:* {a b}", "pump\x00valve", "pump 🙂", "مضخة pump", "a" * 5000,
])
def test_keyword_search_never_errors_on_hostile_text(kb: Path, hostile: str) -> None:
    (kb / "pump.md").write_text("# Pump\n\nThe pump valve opens at 2 bar.\n")
    knowledge_base_ingest(target=kb)
    hits = ChunkSearch.search.keyword(hostile, limit=5)
    assert isinstance(hits, list)
    assert Chunk.objects.count() == 1


@pytest.mark.django_db
def test_search_channels_and_collection_scope(kb: Path) -> None:
    (kb / "a").mkdir()
    (kb / "b").mkdir()
    (kb / "a" / "pump.md").write_text("# Pump\n\nThe centrifugal pump delivers 40 litres per minute.\n")
    (kb / "b" / "valve.md").write_text("# Valve\n\nThe relief valve opens at 6 bar of pressure.\n")
    knowledge_base_ingest(target=kb / "a", collection="alpha")
    knowledge_base_ingest(target=kb / "b", collection="beta")
    alpha = Collection.objects.get(name="alpha").pk
    beta = Collection.objects.get(name="beta").pk
    from foundry_site import llm

    vector = llm.embed(["pressure relief valve"], model="local/all-minilm-l6-v2")[0]
    dense = ChunkSearch.search.nearest(vector, model="local/all-minilm-l6-v2", k=5)
    assert Chunk.objects.get(pk=dense[0].chunk_id).source.path == "valve.md"
    assert 0 < dense[0].score <= 1
    only_alpha = ChunkSearch.search.nearest(vector, model="local/all-minilm-l6-v2", k=5, collection_ids=[alpha])
    assert {Chunk.objects.get(pk=h.chunk_id).source.collection_id for h in only_alpha} == {alpha}
    assert ChunkSearch.search.keyword("valve", collection_ids=[alpha]) == []
    assert len(ChunkSearch.search.keyword("valve", collection_ids=[beta])) == 1
    assert ChunkSearch.search.keyword("valve", collection_ids=[]) == []
