"""The small things: admin name, model names, error pages, favicon, the vote given, API docs by token, 422s."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client, RequestFactory

from foundry_site.services.tokens import token_create
from generation.models import QueryFeedback
from tests.conftest import World, login, record_query

pytestmark = pytest.mark.django_db


def test_admin_is_branded_and_names_summaries_right(world: World) -> None:
    page = login(world.users["root"]).get("/admin/").content.decode()
    assert "Foundry administration" in page and "Django administration" not in page
    assert "Source summaries" in page and "summarys" not in page.lower()


def test_404_page_has_the_navigation(world: World) -> None:
    response = login(world.users["alice"]).get("/no-such-page/")
    page = response.content.decode()
    assert response.status_code == 404 and "Page not found" in page
    assert 'aria-label="Main"' in page and 'href="/sources/"' in page and "Log out" in page


def test_500_page_has_the_navigation_and_a_plain_fallback(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    from foundry_site import views

    request = RequestFactory().get("/ask/")
    request.user = world.users["alice"]
    response = views.server_error(request)
    page = response.content.decode()
    assert response.status_code == 500 and "Something went wrong" in page and 'aria-label="Main"' in page

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("database gone")

    monkeypatch.setattr(views, "render", broken)
    fallback = views.server_error(request)
    assert fallback.status_code == 500 and b"Server error (500)" in fallback.content


def test_favicon_without_signing_in(world: World) -> None:
    response = Client().get("/favicon.ico")
    assert response.status_code == 301 and response["Location"] == "/static/foundry/favicon.svg"
    icon = Client().get("/static/foundry/favicon.svg")
    assert icon.status_code == 200 and b"<svg" in b"".join(icon.streaming_content)
    assert 'rel="icon"' in login(world.users["alice"]).get("/ask/").content.decode()


def test_feedback_buttons_show_the_vote_given(world: World) -> None:
    alice = world.users["alice"]
    row = record_query(alice)
    client = login(alice)
    fresh = client.get(f"/ask/{row.pk}/").content.decode()
    assert "(your vote)" not in fresh and 'aria-pressed="' not in fresh
    assert 'value="correct" class="secondary">' in fresh and 'value="incorrect" class="secondary">' in fresh
    QueryFeedback.objects.create(query=row, user=alice, verdict="incorrect")
    for url in (f"/ask/{row.pk}/", f"/query-log/{row.pk}/"):
        page = client.get(url).content.decode()
        assert 'value="incorrect" class="secondary chosen" aria-pressed="true"' in page, url
        assert "✗ Incorrect (your vote)" in page and 'value="correct" class="secondary" aria-pressed="false"' in page


def test_a_vote_again_is_not_a_second_row_and_a_changed_vote_marks_the_old_one_replaced(world: World) -> None:
    alice = world.users["alice"]
    row = record_query(alice)
    client = login(alice)
    for verdict in ("correct", "correct", "incorrect"):
        client.post(f"/query-log/{row.pk}/feedback", {"verdict": verdict, "note": ""})
    assert list(row.feedback.order_by("pk").values_list("verdict", flat=True)) == ["correct", "incorrect"]
    for url in (f"/ask/{row.pk}/", f"/query-log/{row.pk}/"):
        page = client.get(url).content.decode()
        assert page.count("(replaced by a later verdict)") == 1, url
        assert page.index("Incorrect</span> alice") < page.index("(replaced by a later verdict)"), url


def test_api_docs_and_schema_take_a_bearer_token(world: World) -> None:
    token = token_create(username="alice").plain
    client = Client()
    auth = {"HTTP_AUTHORIZATION": f"Bearer {token}"}
    schema = client.get("/api/v1/openapi.json", **auth)
    assert schema.status_code == 200 and "/api/v1/query" in schema.json()["paths"]
    assert client.get("/api/v1/docs", **auth).status_code == 200
    assert client.get("/api/v1/openapi.json", HTTP_AUTHORIZATION="Bearer fdy_wrong").status_code == 401
    assert client.get("/api/v1/openapi.json").status_code == 302  # no credentials: the sign-in page


def test_validation_errors_name_the_field_once(world: World) -> None:
    token = token_create(username="alice").plain
    response = Client().post(
        "/api/v1/query", json.dumps({"top_k": 3}), content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}"
    )
    assert response.status_code == 422
    assert [e["loc"] for e in response.json()["detail"]] == [["body", "question"]]
