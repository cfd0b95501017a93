from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from tests.conftest import PASSWORD

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "url",
    [
        "/",
        "/sources/",
        "/sources/1/",
        "/sources/1/download",
        "/api/v1/docs",
        "/ask/",
        "/ask/1/",
        "/query-log/",
        "/query-log/1/",
        "/query-log/export.csv",
        "/dashboard/",
        "/generate/",
        "/runs/",
        "/runs/1/",
        "/runs/1/status",
        "/runs/1/download",
    ],
)
def test_every_page_needs_login(client: Client, url: str) -> None:
    response = client.get(url)
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/?next=")


def test_login_and_logout_with_csrf(make_user: Any) -> None:
    make_user("alice")
    client = Client(enforce_csrf_checks=True)
    page = client.get("/accounts/login/?next=/sources/")
    assert page.status_code == 200 and b"Log in" in page.content
    assert client.post("/accounts/login/", {"username": "alice", "password": PASSWORD}).status_code == 403

    token = page.cookies["csrftoken"].value
    bad = client.post("/accounts/login/", {"username": "alice", "password": "wrong", "csrfmiddlewaretoken": token})
    assert bad.status_code == 200 and b"did not match" in bad.content
    ok = client.post(
        "/accounts/login/",
        {"username": "alice", "password": PASSWORD, "csrfmiddlewaretoken": token, "next": "/sources/"},
    )
    assert ok.status_code == 302 and ok["Location"] == "/sources/"

    sources = client.get("/sources/")
    assert sources.status_code == 200 and b"Log out" in sources.content
    token = client.cookies["csrftoken"].value
    assert client.post("/accounts/logout/").status_code == 403  # no CSRF token: still logged in
    assert client.post("/accounts/logout/", {"csrfmiddlewaretoken": token}).status_code == 302
    assert client.get("/sources/").status_code == 302


def test_navigation_shows_admin_to_staff_only(client: Client, make_user: Any) -> None:
    client.force_login(make_user("alice"))
    page = client.get("/sources/").content.decode()
    for label, url in (
        ("Ask", "/ask/"),
        ("Sources", "/sources/"),
        ("Query log", "/query-log/"),
        ("Generate", "/generate/"),
    ):
        assert f'href="{url}"' in page and label in page
    assert 'href="/admin/"' not in page
    client.force_login(make_user("carol", staff=True))
    assert 'href="/admin/"' in client.get("/sources/").content.decode()


def test_navigation_marks_the_page_shown_and_the_page_that_started_it(client: Client, make_user: Any) -> None:
    client.force_login(make_user("alice"))
    ask = '<a href="/ask/" class="active" aria-current="page">Ask</a>'
    assert ask in client.get("/ask/").content.decode()
    assert ask in client.get("/conversations/").content.decode()
    sources = client.get("/sources/").content.decode()
    assert ask not in sources and '<a href="/sources/" class="active" aria-current="page">Sources</a>' in sources
    generate = '<a href="/generate/" class="active" aria-current="page">Generate</a>'
    assert generate in client.get("/runs/").content.decode()


def test_home_goes_to_ask(client: Client, make_user: Any) -> None:
    client.force_login(make_user("alice"))
    assert client.get("/")["Location"] == "/ask/"


def test_api_docs_render_for_a_signed_in_user(client: Client, make_user: Any) -> None:
    client.force_login(make_user("alice"))
    assert client.get("/api/v1/docs").status_code == 200
    assert client.get("/api/v1/openapi.json").status_code == 200
