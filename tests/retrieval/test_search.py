from __future__ import annotations

from pathlib import Path

import pytest

from retrieval.models import ChunkSearch
from retrieval.fusion import Hit, document_rank_fusion, reciprocal_rank_fusion
from retrieval.search import fts_query
from retrieval.services.retrieve import retrieve
from sources.models import Chunk, Collection
from sources.services.ingest_jobs import knowledge_base_ingest


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


# Chunks 11, 12 belong to source 1 (A), 21, 22 to source 2 (B), 31, 32 to source 3 (C).
SOURCE_OF = {11: 1, 12: 1, 21: 2, 22: 2, 31: 3, 32: 3}
DENSE = [Hit(11, 0.9), Hit(21, 0.8), Hit(12, 0.7), Hit(31, 0.6)]  # documents A=1, B=2, C=3
BM25 = [Hit(22, 9.0), Hit(32, 8.0), Hit(12, 7.0)]  # documents B=1, C=2, A=3


def test_document_fusion_ranks_a_source_at_its_best_chunk() -> None:
    fused = document_rank_fusion({"dense": DENSE, "bm25": BM25}, source_of=SOURCE_OF, k=1)
    # A: 1/(1+1) + 1/(1+3) = 0.75; B: 1/(1+2) + 1/(1+1) = 0.8333; C: 1/(1+3) + 1/(1+2) = 0.5833.
    # Within a source, chunks follow chunk-level RRF: 22 (1/2) > 21 (1/3); 11 (1/2) = 12 (1/4 + 1/4), tie by id;
    # 32 (1/3) > 31 (1/5).
    assert [h.chunk_id for h in fused] == [22, 21, 11, 12, 32, 31]
    assert [round(h.score, 4) for h in fused] == [0.8333, 0.8333, 0.75, 0.75, 0.5833, 0.5833]
    # Chunk-level RRF on the same lists puts A first: 11, 12 and 22 all score 1/2.
    chunk_level = reciprocal_rank_fusion({"dense": DENSE, "bm25": BM25}, k=1)
    assert [h.chunk_id for h in chunk_level] == [11, 12, 22, 21, 32, 31]


def test_document_fusion_k_weights_and_single_channel_sources() -> None:
    fused = document_rank_fusion({"dense": DENSE, "bm25": BM25[:1]}, source_of=SOURCE_OF, k=60)
    scores = {SOURCE_OF[h.chunk_id]: h.score for h in fused}
    assert scores == pytest.approx({1: 1 / 61, 2: 1 / 62 + 1 / 61, 3: 1 / 63})
    assert [h.chunk_id for h in fused] == [22, 21, 11, 12, 31]
    weighted = document_rank_fusion(
        {"dense": DENSE, "bm25": BM25[:1]}, source_of=SOURCE_OF, k=60, weights={"dense": 0.0}
    )
    assert [h.chunk_id for h in weighted][:2] == [22, 21]
    assert {h.chunk_id: h.score for h in weighted}[11] == 0.0


def test_document_fusion_keeps_every_chunk_once_and_unknown_chunks_apart() -> None:
    fused = document_rank_fusion(
        {"dense": [Hit(11, 1), Hit(99, 1)], "bm25": [Hit(99, 1), Hit(12, 1)]}, source_of={11: 1, 12: 1}, k=1
    )
    # Source 1: 1/2 + 1/3; chunk 99 (no known source) is a document of its own: 1/3 + 1/2 - a tie,
    # broken like chunk-level RRF ties (by key: 99's key is negative).
    assert sorted(h.chunk_id for h in fused) == [11, 12, 99]
    assert [h.chunk_id for h in fused] == [99, 11, 12]
    assert document_rank_fusion({}, source_of={}, k=60) == []


@pytest.mark.parametrize(
    "hostile",
    [
        'NEAR(a b) OR "x" AND NOT y*',
        "title:secret",
        "'; DROP TABLE sources_chunk; --",
        'a "quoted" word',
        "^start + col:* {a b}",
        "\x00null\x00",
        "🙂 emoji ✓",
        "مرحبا بالعالم",
        "",
        "   ",
        "the of and",
    ],
)
def test_fts_query_quotes_everything(hostile: str) -> None:
    query = fts_query(hostile)
    for term in filter(None, query.split(" OR ")):
        assert term.startswith('"') and term.endswith('"')


@pytest.mark.django_db
@pytest.mark.parametrize(
    "hostile",
    [
        'NEAR(pump valve) OR "x" AND NOT y*',
        "text:pump",
        "'; DROP TABLE sources_chunk; --",
        'pump "quoted"',
        "^pump + col:* {a b}",
        "pump\x00valve",
        "pump 🙂",
        "مضخة pump",
        "a" * 5000,
    ],
)
def test_keyword_search_never_errors_on_hostile_text(kb: Path, hostile: str) -> None:
    (kb / "pump.md").write_text("# Pump\n\nThe pump valve opens at 2 bar.\n")
    knowledge_base_ingest(target=kb)
    hits = ChunkSearch.search.keyword(hostile, limit=5)
    assert isinstance(hits, list)
    assert Chunk.objects.count() == 1


def test_search_channels_and_collection_scope(pump_and_valve: tuple[int, int]) -> None:
    alpha, beta = pump_and_valve
    from core import llm

    vector = llm.embed(["pressure relief valve"], model="local/all-minilm-l6-v2")[0]
    dense = ChunkSearch.search.nearest(vector, model="local/all-minilm-l6-v2", k=5)
    assert Chunk.objects.get(pk=dense[0].chunk_id).source.path == "valve.md"
    assert 0 < dense[0].score <= 1
    only_alpha = ChunkSearch.search.nearest(vector, model="local/all-minilm-l6-v2", k=5, collection_ids=[alpha])
    assert {Chunk.objects.get(pk=h.chunk_id).source.collection_id for h in only_alpha} == {alpha}
    assert ChunkSearch.search.keyword("valve", collection_ids=[alpha]) == []
    assert len(ChunkSearch.search.keyword("valve", collection_ids=[beta])) == 1
    assert ChunkSearch.search.keyword("valve", collection_ids=[]) == []
    # Whether the sources in scope hold a word, by its stem, in the text or the title
    assert ChunkSearch.search.holds("valves") and ChunkSearch.search.holds("Pump", collection_ids=[alpha])
    assert ChunkSearch.search.holds("relief", collection_ids=[beta])
    assert not ChunkSearch.search.holds("relief", collection_ids=[alpha])
    assert not ChunkSearch.search.holds("relief", collection_ids=[]) and not ChunkSearch.search.holds("boss")


SEAL = "Replace the shaft seal of the pump every 2 years."


@pytest.mark.django_db
def test_retrieve_adds_the_chunks_in_scope_that_hold_a_sentence_an_earlier_answer_quoted(kb: Path) -> None:
    """A follow-up reads the passage its earlier turn was answered from, though its own words miss it: after the
    chunks found (which are marked when they hold a quoted sentence), in the collections searched only."""
    for folder, name, text in (
        ("a", "pump.md", "The centrifugal pump delivers 40 litres per minute."),
        ("a", "service.md", SEAL),
        ("b", "copy.md", SEAL),
    ):
        (kb / folder).mkdir(exist_ok=True)
        (kb / folder / name).write_text(f"# {name}\n\n{text}\n")
    knowledge_base_ingest(target=kb / "a", collection="alpha")
    knowledge_base_ingest(target=kb / "b", collection="beta")
    alpha = Collection.objects.get(name="alpha").pk
    question = "How many litres does the centrifugal pump deliver?"

    found = retrieve(question=question, collection_ids=[alpha], top_k=1, quoted=[SEAL.replace(" every", "\n every")])
    assert [(c.label, c.chunk.source.path, c.followed) for c in found.candidates] == [
        ("S1", "pump.md", False),
        ("S2", "service.md", True),
    ]
    assert 0 < found.candidates[1].score < found.candidates[0].score  # its cosine with the question
    everywhere = retrieve(question=question, collection_ids=None, top_k=1, quoted=[SEAL])
    assert sorted(c.chunk.source.path for c in everywhere.candidates if c.followed) == ["copy.md", "service.md"]
    pump = "The centrifugal pump delivers 40 litres per minute."
    itself = retrieve(question=question, collection_ids=[alpha], top_k=1, quoted=[pump])
    assert [(c.chunk.source.path, c.followed) for c in itself.candidates] == [("pump.md", True)]
    refused = retrieve(question="Who won the football world cup in 1954?", collection_ids=[alpha], quoted=[SEAL])
    assert not refused.gate.passed and refused.candidates == []


@pytest.mark.django_db
def test_document_fusion_in_retrieve_groups_chunks_by_source(kb: Path, foundry_config) -> None:
    foundry_config(ingest={"chunk_tokens": 40}, retrieval={"min_chunks": 1, "min_score": 0.0})
    (kb / "pump.md").write_text(
        "# Pump\n\n"
        + " ".join(f"Section {i}: the centrifugal pump moves water through the valve at {i} bar." for i in range(8))
        + "\n"
    )
    (kb / "valve.md").write_text(
        "# Valve\n\n"
        + " ".join(f"Part {i}: the relief valve protects the pump when pressure passes {i} bar." for i in range(8))
        + "\n"
    )
    knowledge_base_ingest(target=kb)
    assert Chunk.objects.filter(source__path="pump.md").count() > 1
    foundry_config(retrieval={"fusion": "chunk"})
    by_chunk = retrieve(question="relief valve pressure of the pump", collection_ids=None, top_k=100)
    foundry_config(retrieval={"fusion": "document"})
    by_doc = retrieve(question="relief valve pressure of the pump", collection_ids=None, top_k=100)
    # Same chunks are found and cited (each keeps its label and location); only the order changes.
    assert {c.chunk.pk for c in by_doc.ranked} == {c.chunk.pk for c in by_chunk.ranked}
    sources = [c.chunk.source.path for c in by_doc.ranked]
    assert sources == sorted(sources, key=sources.index)  # each source's chunks are contiguous
    assert [c.label for c in by_doc.candidates] == [f"S{i}" for i in range(1, len(by_doc.candidates) + 1)]
    assert all(set(c.ranks) <= {"dense", "bm25"} and c.ranks for c in by_doc.ranked)


def _joined_ranking(query: str, collection_ids: list[int], limit: int) -> list[int]:
    """The scoped BM25 ranking computed the direct way (a join to every match's collection)."""
    from django.db import connection

    if connection.vendor != "sqlite":  # the unscoped ranking, its chunks outside the scope left out
        inside = set(Chunk.objects.filter(source__collection_id__in=collection_ids).values_list("id", flat=True))
        ranked = ChunkSearch.search.keyword(query, limit=10_000)
        return [hit.chunk_id for hit in ranked if hit.chunk_id in inside][:limit]
    marks = ",".join(["%s"] * len(collection_ids))
    with connection.cursor() as cur:
        cur.execute(
            "SELECT f.rowid FROM chunks_fts f JOIN sources_chunk c ON c.id = f.rowid "
            "JOIN sources_source s ON s.id = c.source_id WHERE chunks_fts MATCH %s "
            f"AND s.collection_id IN ({marks}) ORDER BY bm25(chunks_fts) LIMIT %s",
            [fts_query(query), *collection_ids, limit],
        )
        return [cid for (cid,) in cur.fetchall()]


@pytest.mark.django_db
@pytest.mark.parametrize("limit", [1, 2, 3, 50])
def test_scoped_keyword_search_equals_ranking_inside_the_scope(kb: Path, foundry_config, limit: int) -> None:
    # 30 chunks of "alpha" outrank beta's two: a scope of beta is not among the first 4 x limit hits.
    foundry_config(ingest={"chunk_tokens": 30})
    (kb / "a").mkdir()
    (kb / "b").mkdir()
    (kb / "a" / "pumps.md").write_text(
        "# Pumps\n\n"
        + "\n\n".join(f"## Pump {i}\n\nThe pump pump pump number {i} moves water." for i in range(30))
        + "\n"
    )
    (kb / "b" / "notes.md").write_text(
        "# Notes\n\n## One\n\nA pump appears once among many other words here "
        "about pipes, tanks, fittings and gauges.\n\n## Two\n\nAnother note "
        "mentions the pump and a long list of unrelated hardware terms.\n"
    )
    knowledge_base_ingest(target=kb / "a", collection="alpha")
    knowledge_base_ingest(target=kb / "b", collection="beta")
    alpha, beta = (Collection.objects.get(name=n).pk for n in ("alpha", "beta"))
    for scope in ([alpha], [beta], [alpha, beta]):
        found = [h.chunk_id for h in ChunkSearch.search.keyword("pump", limit=limit, collection_ids=scope)]
        assert found == _joined_ranking("pump", scope, limit), scope
    assert len(ChunkSearch.search.keyword("pump", limit=2, collection_ids=[beta])) == 2
    assert ChunkSearch.search.keyword("pump", limit=50, collection_ids=None) == ChunkSearch.search.keyword(
        "pump", limit=50, collection_ids=[alpha, beta]
    )


@pytest.fixture
def prune_small_indexes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Leave out common terms even in these tiny indexes (the shipped floor keeps every term
    found in 10,000 chunks or fewer)."""
    monkeypatch.setattr("retrieval.search.PRUNE_FLOOR", 0)


@pytest.mark.django_db
def test_rare_terms_leave_out_words_in_most_chunks(kb: Path, foundry_config, prune_small_indexes) -> None:
    from django.db import connection

    from retrieval.search import rare_terms

    (kb / "manual.md").write_text(
        "# Manual\n\n"
        + "\n\n".join(
            f"## Part {i}\n\nThe pumping station {'has a relief valve' if i == 0 else 'runs quietly'}."
            for i in range(10)
        )
        + "\n"
    )
    foundry_config(ingest={"chunk_tokens": 20})
    knowledge_base_ingest(target=kb)
    assert Chunk.objects.count() == 10
    with connection.cursor() as cur:
        # "pumps" is counted by its stem (pump), which all 10 chunks hold; "valve" is in one.
        assert rare_terms(cur, ["pumps", "valve", "unknownword"], 0.5) == ["valve", "unknownword"]
        assert rare_terms(cur, ["pumps", "valve"], 1.0) == ["pumps", "valve"]
        assert rare_terms(cur, ["pumps", "station"], 0.5) == ["pumps"]  # none rare: the rarest (a tie: first)
        assert rare_terms(cur, ["relief", "valve"], 0.05) == ["relief"]  # 1 of 10 > 5%: rarest only
        cur.execute("SELECT count(*) FROM chunks_fts")
        assert cur.fetchone()[0] == 10
    Chunk.objects.filter(ordinal__gte=5).delete()  # the averages record follows deletions
    with connection.cursor() as cur:
        assert rare_terms(cur, ["relief", "valve", "station"], 0.25) == ["relief", "valve"]


@pytest.mark.django_db
def test_rare_terms_keep_the_rarest_terms_within_a_postings_budget(
    kb: Path, foundry_config, prune_small_indexes
) -> None:
    from django.db import connection

    from retrieval.search import rare_terms

    def words(i: int) -> str:
        return " ".join(w for w, n in (("relief", 1), ("valve", 3), ("gauge", 5), ("station", 10)) if i < n)

    (kb / "manual.md").write_text(
        "# Manual\n\n" + "\n\n".join(f"## Part {i}\n\nThe {words(i)}." for i in range(10)) + "\n"
    )
    foundry_config(ingest={"chunk_tokens": 20})
    knowledge_base_ingest(target=kb)
    assert Chunk.objects.count() == 10
    query = ["station", "gauge", "valve", "relief"]  # in 10, 5, 3 and 1 of the 10 chunks
    with connection.cursor() as cur:
        assert rare_terms(cur, query, 1.0, 64) == query
        assert rare_terms(cur, query, 1.0, 1.8) == ["gauge", "valve", "relief"]  # 1 + 3 + 5 <= 18 < 1 + 3 + 5 + 10
        assert rare_terms(cur, query, 1.0, 0.5) == ["valve", "relief"]  # rarest first, in the question's order
        assert rare_terms(cur, query, 1.0, 0.05) == ["relief"]  # the rarest always
        assert rare_terms(cur, query, 0.4, 1.8) == ["valve", "relief"]  # max_df first: gauge is in 50 %
        assert rare_terms(cur, ["gauges", "pumpless", "relief"], 1.0, 0.05) == ["pumpless", "relief"]  # 0 + 1 chunk


@pytest.mark.django_db
def test_hybrid_keyword_channel_leaves_out_common_terms_and_bm25_mode_does_not(
    kb: Path, foundry_config, prune_small_indexes
) -> None:
    def words(i: int) -> str:
        return " ".join(w for w, keep in (("relief", i % 4 == 0), ("valve", i % 3 == 0)) if keep) or "runs quietly"

    (kb / "manual.md").write_text(
        "# Manual\n\n" + "\n\n".join(f"## Part {i}\n\nThe pump station: {words(i)}." for i in range(12)) + "\n"
    )
    foundry_config(
        ingest={"chunk_tokens": 20}, retrieval={"bm25_max_df": 0.5, "bm25_max_postings": 0.5, "min_score": 0.0}
    )
    knowledge_base_ingest(target=kb)
    everything = ChunkSearch.search.keyword("pump relief valve", limit=20)
    rare = ChunkSearch.search.keyword("pump relief valve", limit=20, max_df=0.5)
    pruned = ChunkSearch.search.keyword("pump relief valve", limit=20, max_df=0.5, max_postings=0.5)
    # "pump" (12 of 12 chunks) is left out; relief (3) and valve (4) add up to 7 > 0.5 x 12: valve too
    assert (len(everything), len(rare), len(pruned)) == (12, 6, 3)
    assert [h.chunk_id for h in rare] == [h.chunk_id for h in everything[:6]]
    hybrid = retrieve(question="pump relief valve", collection_ids=None, mode="hybrid", top_k=20)
    bm25 = retrieve(question="pump relief valve", collection_ids=None, mode="bm25", top_k=20)
    assert [h.chunk_id for h in hybrid.channels["bm25"]] == [h.chunk_id for h in pruned]
    assert [h.chunk_id for h in bm25.channels["bm25"]] == [h.chunk_id for h in everything]
    assert len(hybrid.channels["dense"]) == 12  # the dense channel still reads the whole question


@pytest.mark.django_db
def test_rare_terms_keep_every_term_of_a_small_index(kb: Path) -> None:
    from django.db import connection

    from retrieval.search import rare_terms

    (kb / "manual.md").write_text("# Manual\n\nThe pump station has a relief valve.\n")
    knowledge_base_ingest(target=kb)
    with connection.cursor() as cur:  # "pump" is in every chunk, but 1 chunk is far below the floor
        assert rare_terms(cur, ["pump", "valve"], 0.05) == ["pump", "valve"]
        assert rare_terms(cur, ["pump", "valve"], 0.05, 0.05) == ["pump", "valve"]


@pytest.mark.sqlite_only
def test_keyword_tokenizer_is_the_index_tokenizer() -> None:
    from importlib import import_module

    from retrieval.search import TOKENIZER

    created = import_module("retrieval.migrations.0001_chunks_fts").CREATE[0]
    latest = next(sql for sql in import_module("retrieval.migrations.0010_chunks_fts_stems").FORWARD if "fts5(" in sql)
    assert f"tokenize = '{TOKENIZER}'" in created and f"tokenize = '{TOKENIZER}'" in latest


@pytest.mark.django_db
@pytest.mark.parametrize("mode", ["hybrid", "dense", "bm25"])
def test_retrieve_counts_its_query_embedding_in_the_call_record(kb: Path, mode: str) -> None:
    """The embedding runs on a second thread beside BM25; the per-query call record still sees it."""
    from core import llm

    (kb / "pump.md").write_text("# Pump\n\nThe pump valve opens at 2 bar.\n")
    knowledge_base_ingest(target=kb)
    with llm.record_calls() as record:
        found = retrieve(question="When does the pump valve open?", collection_ids=None, mode=mode)
    assert record.embedding_calls == 1
    assert found.timings["embed"] > 0 and found.timings["search"] >= found.timings["embed"]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("document", "question", "code"),
    [
        (
            "# Netzwerk\n\nAlle Einstellungen des Geräts werden im Speicher abgelegt und beim Neustart geladen.\n",
            "Was geschieht mit der Einstellung?",
            "de",
        ),
        (
            "# Aansluiten\n\nDe aansluitingen van de sensoren zitten aan de onderkant van de behuizing.\n",
            "Waar bevindt zich een aansluiting?",
            "nl",
        ),
    ],
)
def test_keyword_search_matches_an_inflected_form_in_the_chunks_language(
    kb: Path, document: str, question: str, code: str
) -> None:
    from django.db import connection

    from retrieval.search import match_expression, query_terms

    (kb / "manual.md").write_text(document)
    (kb / "other.md").write_text("# Other\n\nThe pump valve opens at 2 bar.\n")
    knowledge_base_ingest(target=kb)
    chunk = Chunk.objects.get(source__path="manual.md")
    assert chunk.language == code and chunk.stems
    assert Chunk.objects.get(source__path="other.md").stems == ""  # English: the index's porter stems it
    hits = ChunkSearch.search.keyword(question)
    assert hits and hits[0].chunk_id == chunk.pk
    with connection.cursor() as cur:
        if connection.vendor != "sqlite":
            # PostgreSQL stems the chunk in its own language: its row is not the English reading of its words.
            cur.execute(
                "SELECT f.document = to_tsvector('english', regexp_replace(c.text || ' ' || c.heading || ' ' || "
                "s.title, '[^[:alnum:]]+', ' ', 'g')) FROM chunks_fts f JOIN sources_chunk c ON c.id = f.chunk_id "
                "JOIN sources_source s ON s.id = c.source_id WHERE f.chunk_id = %s",
                [chunk.pk],
            )
            assert cur.fetchone() == (False,)
            return
        # The words as written (stemmed as English by the index) do not meet: the stems column found it.
        written = "{text heading title} : (" + match_expression(query_terms(question, code)) + ")"
        cur.execute("SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH %s", [written])
        assert chunk.pk not in {rowid for (rowid,) in cur.fetchall()}
