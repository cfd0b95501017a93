"""The MCP tools' logic (``foundry_site.mcp.tools``), called directly: scope, audit, limits, bad input.

Real MiniLM embeddings over two tiny private collections; the answering model is scripted.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from foundry_site.mcp import tools
from core.ratelimit import RateLimited
from generation.answers import QueryError
from generation.models import QueryLog
from generation.querylog.selectors import dashboard_stats
from sources.models import Chunk, Source
from sources.services.collections import collection_create, collection_grant
from sources.services.ingest_jobs import knowledge_base_ingest
from tests.conftest import ScriptedLLM
from tests.generation.conftest import echo_reply

pytestmark = pytest.mark.django_db

QUESTION = "How many sensors can the Falcon gateway connect to its RS-485 bus?"
A_DOC = (
    "# Falcon gateway\n\n## Overview\n\nThe Falcon gateway is a small box for factory floors.\n\n"
    "## Sensor bus\n\nThe Falcon gateway connects up to 12 sensors to its RS-485 bus.\n\n"
    "## Power\n\nThe Falcon gateway runs from 24 V DC and draws at most 3 W.\n"
)
B_DOC = "# Heron pump\n\n## Flow\n\nThe Heron pump moves 40 litres of water a minute.\n"


@dataclass
class Scene:
    alice: Any
    bob: Any
    nobody: Any
    a_source: Source
    b_source: Source


@pytest.fixture
def scene(
    kb: Path, make_user: Callable[..., Any], foundry_config: Any, scripted_llm: ScriptedLLM, settings: Any
) -> Scene:
    settings.FOUNDRY_QUERY_RATE = 0
    foundry_config(retrieval={"min_chunks": 1}, ingest={"window_sentences": 0})
    scripted_llm.reply = echo_reply
    users = {name: make_user(name) for name in ("alice", "bob", "nobody")}
    for name, user, text in (("a-private", "alice", A_DOC), ("b-private", "bob", B_DOC)):
        collection_create(name=name)
        collection_grant(collection=name, username=user)
        (kb / name).mkdir()
        (kb / name / f"{name}.md").write_text(text)
        knowledge_base_ingest(target=kb / name, collection=name)
    return Scene(
        **users,
        a_source=Source.objects.get(collection__name="a-private"),
        b_source=Source.objects.get(collection__name="b-private"),
    )


# --------------------------------------------------------------------------- search


def test_search_returns_located_passages_with_the_gate_verdict(scene: Scene) -> None:
    found = tools.search(scene.alice, query=QUESTION, k=3)
    assert found["gate"]["passed"] is True and found["mode"] == "hybrid"
    best = found["results"][0]
    assert "12 sensors" in best["text"] and best["source"] == "a-private.md"
    assert best["heading"].endswith("Sensor bus") and best["lines"][0] <= best["lines"][1]
    assert best["uri"] == f"foundry://source/{scene.a_source.pk}" and best["passes_gate"] is True
    assert len(found["results"]) <= 3 and all(r["source_id"] == scene.a_source.pk for r in found["results"])


def test_search_leaves_a_search_row_without_an_answer(scene: Scene) -> None:
    found = tools.search(scene.alice, query=QUESTION)
    row = QueryLog.objects.get(pk=found["query_id"])
    assert row.kind == QueryLog.Kind.SEARCH and row.user == scene.alice and row.question == QUESTION
    assert row.answer == "" and row.answer_class == "" and row.llm_calls == 0
    assert [c["chunk_id"] for c in row.citations] == [r["chunk_id"] for r in found["results"]]
    assert all("text" not in c for c in row.citations) and row.gate["passed"] is True
    assert row.collection_ids == [scene.a_source.collection_id]


def test_search_rows_stay_out_of_the_answer_dashboard(scene: Scene) -> None:
    tools.search(scene.alice, query=QUESTION)
    tools.ask(scene.alice, question=QUESTION)
    assert dashboard_stats(QueryLog.objects.all()).total == 1


def test_search_never_calls_a_language_model(scene: Scene, foundry_config: Any, scripted_llm: ScriptedLLM) -> None:
    foundry_config(
        retrieval={"hyde": True, "hyde_model": "scripted/hyde", "scorer_model": "scripted/scorer", "min_chunks": 1}
    )
    found = tools.search(scene.alice, query=QUESTION)
    assert found["results"] and scripted_llm.calls == []
    assert QueryLog.objects.get(pk=found["query_id"]).hyde_text == ""


def test_search_refused_by_the_gate_still_lists_what_it_found(scene: Scene) -> None:
    found = tools.search(scene.alice, query="What is the boiling point of liquid nitrogen on Neptune's moons?")
    assert found["gate"]["passed"] is False and "min_score" in found["gate"]["reason"]
    assert all(r["passes_gate"] is False for r in found["results"])


def test_search_sees_only_the_users_collections(scene: Scene) -> None:
    assert all(r["source_id"] == scene.b_source.pk for r in tools.search(scene.bob, query=QUESTION)["results"])
    with pytest.raises(tools.ToolInputError, match="Collection 'a-private' not found"):
        tools.search(scene.bob, query=QUESTION, collection="a-private")
    with pytest.raises(tools.ToolInputError, match="Collection 'no-such' not found"):
        tools.search(scene.bob, query=QUESTION, collection="no-such")
    with pytest.raises(tools.ToolInputError, match="cannot read any collection"):
        tools.search(scene.nobody, query=QUESTION)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"query": ""}, "query is empty"),
        ({"query": " \t\n "}, "query is empty"),
        ({"query": "x" * 4001}, "query is 4001 characters long; the limit is 4000"),
        ({"query": "bus", "k": 0}, "k must be a whole number from 1 to 50"),
        ({"query": "bus", "k": 51}, "k must be a whole number from 1 to 50"),
        ({"query": "bus", "k": True}, "k must be a whole number"),
    ],
)
def test_search_bad_input_is_a_clear_error_and_not_logged(scene: Scene, kwargs: dict, message: str) -> None:
    with pytest.raises(tools.ToolInputError, match=message):
        tools.search(scene.alice, **kwargs)
    assert not QueryLog.objects.exists()


def test_search_and_ask_share_the_query_rate_limit(scene: Scene, settings: Any) -> None:
    settings.FOUNDRY_QUERY_RATE = 2
    tools.search(scene.alice, query=QUESTION)
    tools.ask(scene.alice, question=QUESTION)
    with pytest.raises(RateLimited, match="at most 2 a minute"):
        tools.search(scene.alice, query=QUESTION)
    with pytest.raises(RateLimited):
        tools.ask(scene.alice, question=QUESTION)
    tools.search(scene.bob, query=QUESTION)  # per user
    assert QueryLog.objects.filter(user=scene.alice).count() == 2


# --------------------------------------------------------------------------- ask


def test_ask_returns_the_verified_answer_with_citations(scene: Scene) -> None:
    answer = tools.ask(scene.alice, question=QUESTION, collection="a-private")
    assert answer["answer_class"] in ("normal", "low_confidence") and "12 sensors" in answer["answer"]
    assert answer["citations"] and all(c["source"] == "a-private.md" for c in answer["citations"])
    row = QueryLog.objects.get(pk=answer["query_id"])
    assert row.kind == QueryLog.Kind.ANSWER and row.user == scene.alice


def test_ask_refuses_without_evidence_and_without_a_model_call(scene: Scene, scripted_llm: ScriptedLLM) -> None:
    answer = tools.ask(scene.bob, question=QUESTION)
    assert answer["answer_class"] == "no_evidence" and answer["refusal"] == "gate" and not answer["citations"]
    assert "12 sensors" not in str(answer) and scripted_llm.calls == []


def test_ask_bad_input(scene: Scene) -> None:
    with pytest.raises(QueryError, match="question is empty"):
        tools.ask(scene.alice, question="  ")
    with pytest.raises(tools.ToolInputError, match="Collection 'b-private' not found"):
        tools.ask(scene.alice, question=QUESTION, collection="b-private")
    assert not QueryLog.objects.exists()


# --------------------------------------------------------------------------- reads


def test_get_chunk_with_neighbours(scene: Scene) -> None:
    chunks = list(scene.a_source.chunks.order_by("ordinal"))
    assert len(chunks) >= 3, "the document must make at least three chunks"
    middle = chunks[1]
    got = tools.get_chunk(scene.alice, chunk_id=middle.pk, neighbours=1)
    assert got["chunk"]["text"] == middle.text and got["chunk"]["chunk_id"] == middle.pk
    assert [c["chunk_id"] for c in got["before"]] == [chunks[0].pk]
    assert [c["chunk_id"] for c in got["after"]] == [chunks[2].pk]
    assert got["source"]["name"] == "a-private.md" and got["source"]["collection"] == "a-private"
    assert tools.get_chunk(scene.alice, chunk_id=middle.pk)["before"] == []


def test_get_chunk_of_another_user_is_not_found(scene: Scene) -> None:
    theirs = scene.a_source.chunks.first()
    missing = Chunk.objects.order_by("-pk").first().pk + 100
    for chunk_id in (theirs.pk, missing):
        with pytest.raises(tools.ToolInputError, match=f"Chunk {chunk_id} not found"):
            tools.get_chunk(scene.bob, chunk_id=chunk_id)
    for neighbours in (-1, 6):
        with pytest.raises(tools.ToolInputError, match="neighbours must be a whole number from 0 to 5"):
            tools.get_chunk(scene.alice, chunk_id=theirs.pk, neighbours=neighbours)


def test_list_collections_and_sources_are_scoped(scene: Scene) -> None:
    assert tools.list_collections(scene.alice)["collections"] == [
        {"name": "a-private", "description": "", "public": False, "sources": 1}
    ]
    assert tools.list_collections(scene.nobody)["collections"] == []
    listed = tools.list_sources(scene.bob)
    assert [s["source_id"] for s in listed["sources"]] == [scene.b_source.pk] and listed["truncated"] is False
    assert listed["sources"][0]["uri"] == f"foundry://source/{scene.b_source.pk}"
    with pytest.raises(tools.ToolInputError, match="Collection 'a-private' not found"):
        tools.list_sources(scene.bob, collection="a-private")


def test_source_resource_holds_every_chunk_in_order(scene: Scene) -> None:
    read = tools.read_source(scene.alice, source_id=str(scene.a_source.pk))
    assert [c["chunk_id"] for c in read["chunks"]] == list(
        scene.a_source.chunks.order_by("ordinal").values_list("pk", flat=True)
    )
    assert "12 sensors" in " ".join(c["text"] for c in read["chunks"])
    assert [r["uri"] for r in tools.readable_source_refs(scene.alice)] == [f"foundry://source/{scene.a_source.pk}"]
    for source_id in (str(scene.a_source.pk), "abc", "1e3", "99999999999999999999"):
        with pytest.raises(tools.ToolInputError, match="not found"):
            tools.read_source(scene.bob, source_id=source_id)


def test_query_log_page_labels_a_search(scene: Scene, client: Any) -> None:
    found = tools.search(scene.alice, query=QUESTION)
    client.force_login(scene.alice)
    for url in ("/query-log/", f"/query-log/{found['query_id']}/"):
        response = client.get(url)
        assert response.status_code == 200 and "Search (passages only)" in response.content.decode(), url
