"""The Content-Security-Policy: every page sends it, the pages' own scripts carry its nonce, and
no template relies on what it forbids (inline event handlers, script URLs)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.test import Client

from tests.conftest import World, login, record_query

pytestmark = pytest.mark.django_db

INLINE_HANDLER = re.compile(r"<[^>]*\son[a-z]+\s*=", re.IGNORECASE)
SCRIPT_TAG = re.compile(r"<script\b([^>]*)>", re.IGNORECASE)


def policy(response: Any) -> dict[str, list[str]]:
    header = response.headers.get("Content-Security-Policy", "")
    return {d.split()[0]: d.split()[1:] for d in header.split(";") if d.strip()}


def test_pages_send_a_policy_that_forbids_inline_script(world: World) -> None:
    client = login(world.users["root"])
    row = record_query(world.users["root"])
    source = world.sources["alpha"]
    for url in (
        "/ask/",
        f"/ask/{row.pk}/",
        "/sources/",
        f"/sources/{source.pk}/?chunk={world.chunks['alpha'][0].pk}",
        "/query-log/",
        f"/query-log/{row.pk}/",
        "/dashboard/",
        "/generate/",
        "/runs/",
        "/admin/",
        "/api/v1/docs",
        "/accounts/login/",
    ):
        response = (Client() if url == "/accounts/login/" else client).get(url)
        assert response.status_code == 200, url
        csp = policy(response)
        assert csp["script-src"][0] == "'self'" and "'unsafe-inline'" not in csp["script-src"], url
        assert csp["object-src"] == ["'none'"] and csp["base-uri"] == ["'none'"], url
        assert csp["frame-ancestors"] == ["'none'"] and csp["form-action"] == ["'self'"], url
        # Every script block of ours carries this response's nonce, and the header names it.
        nonces = {n[7:-1] for n in csp["script-src"] if n.startswith("'nonce-")}
        for attrs in SCRIPT_TAG.findall(response.content.decode()):
            if "src=" in attrs or 'type="application/json"' in attrs:
                continue
            found = re.search(r'nonce="([^"]+)"', attrs)
            assert found and found.group(1) in nonces, (url, attrs)


def test_a_fresh_nonce_for_every_response(world: World) -> None:
    client = login(world.users["alice"])
    first, second = client.get("/ask/"), client.get("/ask/")
    assert policy(first)["script-src"] != policy(second)["script-src"]


def test_no_template_uses_inline_handlers_or_script_urls() -> None:
    """They would be blocked by the policy: wire events in a nonce-tagged script instead."""
    offenders = []
    for path in Path(settings.BASE_DIR, "templates").rglob("*.html"):
        text = path.read_text()
        if INLINE_HANDLER.search(text) or "javascript:" in text.lower():
            offenders.append(str(path))
    assert offenders == []


def test_the_api_answers_with_the_policy_too(client: Client) -> None:
    assert policy(client.get("/api/v1/runs"))["default-src"] == ["'self'"]
