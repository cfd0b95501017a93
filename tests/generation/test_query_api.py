"""``POST /api/v1/query``: auth, scope, bad input, rate limit, model and embedding failures."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from core.ratelimit import rate_limit_check
from foundry_site.services.tokens import token_create
from generation.models import QueryLog
from sources.models import Collection
from tests.conftest import ScriptedLLM, World

pytestmark = pytest.mark.django_db

QUESTION = "How many sensors can be connected to the RS-485 bus?"


def api(username: str) -> Client:
    token = token_create(username=username, name="test")
    return Client(enforce_csrf_checks=True, HTTP_AUTHORIZATION=f"Bearer {token.plain}")


def query(client: Client, **body: Any) -> Any:
    return client.post("/api/v1/query", json.dumps({"question": QUESTION, **body}), content_type="application/json")


def test_answer_is_scoped_and_complete(scoped: dict, scripted_llm: ScriptedLLM) -> None:
    response = query(api("alice"))
    assert response.status_code == 200, response.content
    body = response.json()
    assert set(body) == {
        "query_id",
        "conversation_id",
        "question",
        "run_id",
        "answer_class",
        "answer",
        "citations",
        "conflicts",
        "coverage",
        "refusal",
        "hint",
        "timings",
        "llm_calls",
        "cached",
    }
    assert body["answer_class"] in ("normal", "low_confidence") and body["llm_calls"] == 1
    assert {c["source"] for c in body["citations"]} == {"alpha-notes.md"}
    assert "8 sensors" in body["citations"][0]["text"] and body["timings"]["total"] > 0
    row = QueryLog.objects.get(pk=body["query_id"])
    assert row.run_id == body["run_id"] and row.user == scoped["alice"]
    bob = query(api("bob")).json()
    assert {c["source"] for c in bob["citations"]} == {"beta-notes.md"} and "32 sensors" in bob["answer"]
    again = query(api("alice")).json()
    assert again["cached"] and again["llm_calls"] == 0 and again["answer"] == body["answer"]
    dense = query(api("alice"), mode="dense", top_k=3).json()
    assert QueryLog.objects.get(pk=dense["query_id"]).mode == "dense"


def test_one_collection_of_ones_own_or_404(scoped: dict, scripted_llm: ScriptedLLM) -> None:
    within = query(api("root"), collection="beta").json()
    assert {c["source"] for c in within["citations"]} == {"beta-notes.md"}
    row = QueryLog.objects.get(pk=within["query_id"])
    assert row.collection_ids == [Collection.objects.get(name="beta").pk]
    for name in ("beta", "nope"):  # alice cannot read beta: the same answer as for a name that does not exist
        response = query(api("alice"), collection=name)
        assert response.status_code == 404 and "detail" in response.json()
    assert QueryLog.objects.count() == 1


def test_model_failure_is_503_and_logged(scoped: dict, scripted_llm: ScriptedLLM, foundry_config: Any) -> None:
    foundry_config(llm={"retries": 1})
    scripted_llm.reply = lambda m: ""
    response = query(api("alice"))
    assert response.status_code == 503 and "The model failed while answering" in response.json()["detail"]
    assert QueryLog.objects.get().status == "failed"


def test_needs_authentication(world: World) -> None:
    assert query(Client(enforce_csrf_checks=True)).status_code == 401
    assert query(Client(HTTP_AUTHORIZATION="Bearer fdy_wrong")).status_code == 401
    session = Client(enforce_csrf_checks=True)
    session.force_login(world.users["alice"])
    assert query(session).status_code == 403  # a browser session must send the CSRF token


@pytest.mark.parametrize(
    "body,status",
    [
        ({"question": ""}, 400),
        ({"question": " \x00 "}, 400),
        ({"question": "x" * 4001}, 400),
        ({"question": 5}, 422),
        ({"mode": "fuzzy"}, 422),
        ({"top_k": 0}, 422),
        ({"top_k": 51}, 422),
    ],
)
def test_bad_input(world: World, body: dict, status: int) -> None:
    response = query(api("alice"), **body)
    assert response.status_code == status
    assert "detail" in response.json()
    assert QueryLog.objects.count() == 0


def test_rate_limited_is_429_with_retry_after(world: World, settings: Any) -> None:
    settings.FOUNDRY_QUERY_RATE = 2
    alice = world.users["alice"]
    rate_limit_check(alice.pk)
    rate_limit_check(alice.pk)
    response = query(api("alice"))
    assert response.status_code == 429 and 1 <= int(response["Retry-After"]) <= 60
    assert response.json()["detail"].startswith("Too many queries: at most 2 a minute.")
    assert query(api("bob")).status_code == 503  # bob has his own budget (and no embeddings exist here)


def test_no_embeddings_is_503_and_no_collections_is_400(world: World, make_user: Any) -> None:
    missing = query(api("alice"))
    assert missing.status_code == 503 and "No embeddings found for model" in missing.json()["detail"]
    make_user("dave")
    world.collections["handbook"].public = False
    world.collections["handbook"].save()
    nothing = query(api("dave"))
    assert nothing.status_code == 400 and "cannot read any collection" in nothing.json()["detail"]
