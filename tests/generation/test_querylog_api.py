"""``/api/v1/query-log``: auth, scoping, filters, pagination, detail, feedback."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.test import Client

from foundry_site.services.tokens import token_create
from generation.models import QueryFeedback
from tests.conftest import World
from tests.conftest import record_query as record

pytestmark = pytest.mark.django_db


def api(username: str) -> Client:
    token = token_create(username=username, name="test")
    return Client(enforce_csrf_checks=True, HTTP_AUTHORIZATION=f"Bearer {token.plain}")


def auditor(user: Any) -> Any:
    """``user`` with the audit permission that shows every user's query-log rows."""
    user.user_permissions.add(Permission.objects.get(codename="view_querylog"))
    return user


def post(client: Client, url: str, body: dict) -> Any:
    return client.post(f"/api/v1{url}", json.dumps(body), content_type="application/json")


def test_needs_authentication(world: World) -> None:
    row = record(world.users["alice"])
    assert Client().get("/api/v1/query-log").status_code == 401
    assert Client().get(f"/api/v1/query-log/{row.pk}").status_code == 401
    assert (
        post(Client(enforce_csrf_checks=True), f"/query-log/{row.pk}/feedback", {"verdict": "correct"}).status_code
        == 401
    )


def test_list_is_scoped_filtered_and_paginated(world: World) -> None:
    alice, bob = world.users["alice"], world.users["bob"]
    for n in range(55):
        record(alice, question=f"alpha question {n}", collection_ids=[world.collections["handbook"].pk])
    record(alice, question="nothing here", answer_class="no_evidence", collection_ids=[world.collections["alpha"].pk])
    record(bob, question="bob's secret question", collection_ids=[world.collections["beta"].pk])
    client = api("alice")
    body = client.get("/api/v1/query-log").json()
    assert body["count"] == 56 and len(body["items"]) == 50
    assert client.get("/api/v1/query-log?page=2").json()["items"][-1]["question"] == "alpha question 0"
    item = body["items"][0]
    assert set(item) == {
        "id",
        "run_id",
        "created_at",
        "user",
        "question",
        "answer_class",
        "status",
        "refusal",
        "coverage",
        "cached",
        "total_ms",
        "feedback",
    }
    assert item["user"] == "alice" and item["total_ms"] == 100.0
    assert client.get("/api/v1/query-log?q=secret").json()["count"] == 0
    assert client.get("/api/v1/query-log?user=bob").json()["count"] == 56  # ignored without the audit permission
    assert client.get("/api/v1/query-log?answer_class=no_evidence").json()["count"] == 1
    assert client.get("/api/v1/query-log?collection=alpha").json()["count"] == 1
    assert client.get("/api/v1/query-log?collection=beta").json()["count"] == 0
    staff = api("carol")  # staff status alone: carol's own rows (none), filters cannot widen that
    for query in ("", "?user=bob", "?collection=beta", "?q=secret"):
        assert staff.get(f"/api/v1/query-log{query}").json()["count"] == 0, query
    auditor(world.users["carol"])
    assert staff.get("/api/v1/query-log").json()["count"] == 57
    assert staff.get("/api/v1/query-log?user=bob").json()["items"][0]["question"] == "bob's secret question"
    assert staff.get("/api/v1/query-log?collection=beta").json()["count"] == 1
    assert client.get("/api/v1/query-log?answer_class=great").status_code == 422
    assert client.get("/api/v1/query-log?date_from=yesterday").status_code == 422


def test_detail_and_404_for_others(world: World) -> None:
    chunk = world.chunks["alpha"][0]
    row = record(
        world.users["alice"],
        channels={"dense": [[chunk.pk, 0.8]]},
        gate={"passed": True},
        citations=[
            {
                "id": "S1",
                "chunk_id": chunk.pk,
                "source": "alpha.md",
                "title": "alpha.md",
                "heading": "Alpha",
                "page": None,
                "lines": [1, 1],
                "score": 0.8,
            }
        ],
        prompt_tokens=10,
        completion_tokens=5,
        llm_calls=1,
        model="scripted/generator",
    )
    QueryFeedback.objects.create(query=row, user=world.users["alice"], verdict="correct", note="fine")
    body = api("alice").get(f"/api/v1/query-log/{row.pk}").json()
    assert body["channels"] == {"dense": [[chunk.pk, 0.8]]} and body["gate"] == {"passed": True}
    assert body["citations"][0]["chunk_id"] == chunk.pk and body["model"] == "scripted/generator"
    assert body["feedback"] == "correct" and body["feedback_list"][0]["note"] == "fine"
    assert api("bob").get(f"/api/v1/query-log/{row.pk}").status_code == 404
    assert api("carol").get(f"/api/v1/query-log/{row.pk}").status_code == 404  # staff, without the permission
    auditor(world.users["carol"]), auditor(world.users["bob"])
    for who in ("carol", "bob", "root"):  # the audit permission, staff or not; a superuser holds every one
        body = api(who).get(f"/api/v1/query-log/{row.pk}").json()
        assert body["answer"] == "An answer." and body["citations"][0]["chunk_id"] == chunk.pk, who
    assert api("alice").get("/api/v1/query-log/999999").json() == {"detail": "Not Found"}


def test_feedback_permissions_and_validation(world: World) -> None:
    row = record(world.users["alice"])
    url = f"/query-log/{row.pk}/feedback"
    made = post(api("alice"), url, {"verdict": "incorrect", "note": "the bus has 8 ports"})
    assert made.status_code == 201 and made.json()["verdict"] == "incorrect" and made.json()["user"] == "alice"
    assert post(api("bob"), url, {"verdict": "correct"}).status_code == 404
    assert post(api("carol"), url, {"verdict": "correct"}).status_code == 404  # staff, without the permission
    assert (
        post(api("carol"), f"/query-log/{record(world.users['carol']).pk}/feedback", {"verdict": "correct"}).status_code
        == 201
    )  # on their own row, as before
    auditor(world.users["bob"])  # an auditor who is not staff reads the row but does not judge it
    assert api("bob").get(f"/api/v1/query-log/{row.pk}").status_code == 200
    assert post(api("bob"), url, {"verdict": "correct"}).status_code == 404
    auditor(world.users["carol"])  # a staff auditor judges anyone's answer, as staff did before
    assert post(api("carol"), url, {"verdict": "correct"}).status_code == 201
    bad = post(api("alice"), url, {"verdict": "meh"})
    assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == ["body", "verdict"]
    assert post(api("alice"), url, {"verdict": "correct", "note": "x" * 4001}).status_code == 400
    assert post(api("alice"), url, {"note": "no verdict"}).status_code == 422
    assert QueryFeedback.objects.count() == 3


def test_session_feedback_needs_csrf(world: World) -> None:
    row = record(world.users["alice"])
    client = Client(enforce_csrf_checks=True)
    client.force_login(world.users["alice"])
    assert post(client, f"/query-log/{row.pk}/feedback", {"verdict": "correct"}).status_code == 403
