"""The access matrix: every route, API operation, /v1/ route and MCP tool, called by three callers.

Each entry of MATRIX is one request at A's material (alice reads ``a-private``; the world of
``test_access_control.py``). It goes out anonymously, as bob (who cannot read ``a-private``)
and as alice, and each answer is checked against its row: the anonymous caller gets 401 or the
login page, bob a 404 (or, for a list, a page without A's material), alice her success status
and, where the row names it, her material. The routes come from Django's URL resolver, the
operations from ninja's OpenAPI schema and the tools from the MCP server itself: one without a
row fails ``test_every_route_operation_and_tool_has_a_row``. What bob must not reach in
depth (guessed ids, path traversal, cached answers) is ``test_access_control.py``'s; this file
holds the three callers side by side, so a route open to anyone or closed to its own reader
shows.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from foundry_site.mcp.server import foundry_server
from sources.models import Source
from tests.reliability.test_access_control import A_FACT, QUESTION, World, api_operations, web_routes, world  # noqa: F401

# The MCP tools run on worker threads with their own connections: the world must be committed.
pytestmark = pytest.mark.django_db(transaction=True)

LOGIN, UNAUTHORIZED, PUBLIC, STAFF = "login", "401", "public", "staff"
NOT_FOUND, HIDDEN, SAME = "404", "hidden", "same"  # what bob gets: 404; A's material left out of a 200; as alice


@dataclass(frozen=True)
class Row:
    method: str
    url: Callable[[World], str]
    auth: str = "session"  # session | bearer
    body: Callable[[World], dict[str, Any]] | None = None
    json_body: bool = False
    anonymous: str = LOGIN
    outsider: str = NOT_FOUND
    reader: int = 200  # deleting a source needs staff as well: alice, a reader, gets 403 (bob still 404)
    shows: Callable[[World], str] | None = None  # text of A's that alice sees (and bob, when HIDDEN, does not)
    last: bool = False  # changes A's material: run after the others


def _source(w: World) -> str:
    return w.a_source.path


def _upload(w: World) -> dict[str, Any]:
    return {"collection": "a-private", "file": SimpleUploadedFile("new.md", b"# New\n\nA new file.\n")}


def _api_upload(w: World) -> dict[str, Any]:
    return {"collection": "a-private", "file": SimpleUploadedFile("new-api.md", b"# New\n\nAnother file.\n")}


def _question(w: World) -> str:
    return QUESTION


def _fact(w: World) -> str:
    return A_FACT


def _topic(w: World) -> str:
    return w.a_run.topic


def _chat(w: World) -> dict[str, Any]:
    return {"model": "foundry/a-private", "messages": [{"role": "user", "content": QUESTION}]}


MATRIX: dict[str, Row] = {
    # ------------------------------------------------------------------ pages (session)
    "": Row("get", lambda w: "/", outsider=SAME, reader=302),
    "favicon.ico": Row("get", lambda w: "/favicon.ico", anonymous=PUBLIC, outsider=SAME, reader=301),
    "accounts/login/": Row("get", lambda w: "/accounts/login/", anonymous=PUBLIC, outsider=SAME, reader=302),
    "accounts/logout/": Row("post", lambda w: "/accounts/logout/", outsider=SAME, reader=302),
    "i18n/setlang/": Row(
        "post",
        lambda w: "/i18n/setlang/",
        body=lambda w: {"language": "nl", "next": "/"},
        anonymous=PUBLIC,
        outsider=SAME,
        reader=302,
    ),
    "sources/": Row("get", lambda w: "/sources/", outsider=HIDDEN, shows=_source),
    "sources/upload": Row("post", lambda w: "/sources/upload", body=_upload, outsider="400", reader=302),
    "sources/<int:source_id>/": Row("get", lambda w: f"/sources/{w.a_source.pk}/", shows=lambda w: "alpha team"),
    "sources/<int:source_id>/download": Row("get", lambda w: f"/sources/{w.a_source.pk}/download"),
    "sources/<int:source_id>/original": Row("get", lambda w: f"/sources/{w.a_source.pk}/original"),
    "sources/<int:source_id>/delete": Row("post", lambda w: f"/sources/{w.a_source.pk}/delete", reader=403, last=True),
    "ask/": Row("get", lambda w: "/ask/", outsider=HIDDEN, shows=_question),
    "ask/stream": Row(
        "post",
        lambda w: "/ask/stream",
        body=lambda w: {"question": "And how many sensors?", "conversation": w.a_query.conversation_id},
    ),
    "conversations/": Row("get", lambda w: "/conversations/", outsider=HIDDEN, shows=_question),
    "conversations/<int:conversation_id>/": Row(
        "get", lambda w: f"/conversations/{w.a_query.conversation_id}/", shows=_question
    ),
    "ask/<int:query_id>/": Row("get", lambda w: f"/ask/{w.a_query.pk}/", shows=_fact),
    "runs/": Row("get", lambda w: "/runs/", outsider=HIDDEN, shows=_topic),
    "runs/<int:run_id>/": Row("get", lambda w: f"/runs/{w.a_run.pk}/", shows=_topic),
    "runs/<int:run_id>/status": Row("get", lambda w: f"/runs/{w.a_run.pk}/status"),
    "runs/<int:run_id>/download": Row("get", lambda w: f"/runs/{w.a_run.pk}/download", shows=_fact),
    "query-log/": Row("get", lambda w: "/query-log/", outsider=HIDDEN, shows=_question),
    "query-log/export.csv": Row("get", lambda w: "/query-log/export.csv", outsider=HIDDEN, shows=_question),
    "query-log/<int:query_id>/": Row("get", lambda w: f"/query-log/{w.a_query.pk}/", shows=_question),
    "query-log/<int:query_id>/feedback": Row(
        "post", lambda w: f"/query-log/{w.a_query.pk}/feedback", body=lambda w: {"verdict": "incorrect"}, reader=302
    ),
    "dashboard/": Row("get", lambda w: "/dashboard/", outsider=SAME),
    "generate/": Row("get", lambda w: "/generate/", outsider=SAME),
    "admin/": Row("get", lambda w: "/admin/", anonymous=STAFF, outsider=STAFF, reader=302),
    "api/v1/docs": Row("get", lambda w: "/api/v1/docs", outsider=SAME),
    "api/v1/openapi.json": Row("get", lambda w: "/api/v1/openapi.json", outsider=SAME),
    # ------------------------------------------------------------------ MCP and the OpenAI-compatible API (bearer)
    "mcp": Row(
        "post",
        lambda w: "/mcp",
        auth="bearer",
        json_body=True,
        anonymous=UNAUTHORIZED,
        outsider=SAME,
        body=lambda w: {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
    ),
    "v1/models": Row(
        "get",
        lambda w: "/v1/models",
        auth="bearer",
        anonymous=UNAUTHORIZED,
        outsider=HIDDEN,
        shows=lambda w: "foundry/a-private",
    ),
    "v1/models/<path:model>": Row(
        "get", lambda w: "/v1/models/foundry/a-private", auth="bearer", anonymous=UNAUTHORIZED
    ),
    "v1/chat/completions": Row(
        "post",
        lambda w: "/v1/chat/completions",
        auth="bearer",
        json_body=True,
        body=_chat,
        anonymous=UNAUTHORIZED,
        shows=_fact,
    ),
    # Not a route of the OpenAI API: the same 404 for everyone with a token.
    "v1/<anything:path>": Row("get", lambda w: "/v1/a-private", auth="bearer", anonymous=UNAUTHORIZED, reader=404),
    # ------------------------------------------------------------------ the JSON API (bearer)
    "GET /api/v1/sources": Row(
        "get", lambda w: "/api/v1/sources", auth="bearer", anonymous=UNAUTHORIZED, outsider=HIDDEN, shows=_source
    ),
    "POST /api/v1/sources": Row(
        "post", lambda w: "/api/v1/sources", auth="bearer", body=_api_upload, anonymous=UNAUTHORIZED, reader=201
    ),
    "DELETE /api/v1/sources/{source_id}": Row(
        "delete",
        lambda w: f"/api/v1/sources/{w.a_source.pk}",
        auth="bearer",
        anonymous=UNAUTHORIZED,
        reader=403,
        last=True,
    ),
    "GET /api/v1/sources/{source_id}/chunks/{chunk_id}": Row(
        "get",
        lambda w: f"/api/v1/sources/{w.a_source.pk}/chunks/{w.a_chunk.pk}",
        auth="bearer",
        anonymous=UNAUTHORIZED,
        shows=_fact,
    ),
    "POST /api/v1/query": Row(
        "post",
        lambda w: "/api/v1/query",
        auth="bearer",
        json_body=True,
        anonymous=UNAUTHORIZED,
        body=lambda w: {"question": "And how many sensors?", "conversation_id": w.a_query.conversation_id},
    ),
    "GET /api/v1/conversations": Row(
        "get",
        lambda w: "/api/v1/conversations",
        auth="bearer",
        anonymous=UNAUTHORIZED,
        outsider=HIDDEN,
        shows=_question,
    ),
    "GET /api/v1/conversations/{conversation_id}": Row(
        "get",
        lambda w: f"/api/v1/conversations/{w.a_query.conversation_id}",
        auth="bearer",
        anonymous=UNAUTHORIZED,
        shows=_question,
    ),
    "GET /api/v1/query-log": Row(
        "get", lambda w: "/api/v1/query-log", auth="bearer", anonymous=UNAUTHORIZED, outsider=HIDDEN, shows=_question
    ),
    "GET /api/v1/query-log/{query_id}": Row(
        "get", lambda w: f"/api/v1/query-log/{w.a_query.pk}", auth="bearer", anonymous=UNAUTHORIZED, shows=_fact
    ),
    "POST /api/v1/query-log/{query_id}/feedback": Row(
        "post",
        lambda w: f"/api/v1/query-log/{w.a_query.pk}/feedback",
        auth="bearer",
        json_body=True,
        body=lambda w: {"verdict": "incorrect"},
        anonymous=UNAUTHORIZED,
        reader=201,
    ),
    "GET /api/v1/runs": Row(
        "get", lambda w: "/api/v1/runs", auth="bearer", anonymous=UNAUTHORIZED, outsider=HIDDEN, shows=_topic
    ),
    "GET /api/v1/runs/{run_id}": Row(
        "get", lambda w: f"/api/v1/runs/{w.a_run.pk}", auth="bearer", anonymous=UNAUTHORIZED, shows=_topic
    ),
    "GET /api/v1/runs/{run_id}/download": Row(
        "get", lambda w: f"/api/v1/runs/{w.a_run.pk}/download", auth="bearer", anonymous=UNAUTHORIZED, shows=_fact
    ),
    # Approved specs are shared by design; a generation run searches the caller's own collections (its case in
    # test_access_control.py checks which).
    "GET /api/v1/specs": Row("get", lambda w: "/api/v1/specs", auth="bearer", anonymous=UNAUTHORIZED, outsider=SAME),
    "POST /api/v1/generate": Row(
        "post",
        lambda w: "/api/v1/generate",
        auth="bearer",
        json_body=True,
        anonymous=UNAUTHORIZED,
        outsider=SAME,
        body=lambda w: {"topic": "Sensor wiring", "feature": "guide"},
        reader=202,
    ),
}

# Every MCP tool called at A's material; bob gets a tool error (or a list without A's), alice her material.
TOOLS: dict[str, tuple[Callable[[World], dict[str, Any]], str, Callable[[World], str]]] = {
    "search": (lambda w: {"query": QUESTION, "collection": "a-private"}, NOT_FOUND, _fact),
    "ask": (lambda w: {"question": QUESTION, "collection": "a-private"}, NOT_FOUND, _fact),
    "get_chunk": (lambda w: {"chunk_id": w.a_chunk.pk}, NOT_FOUND, _fact),
    "list_collections": (lambda w: {}, HIDDEN, lambda w: "a-private"),
    "list_sources": (lambda w: {"collection": "a-private"}, NOT_FOUND, lambda w: w.a_source.name),
}


def mcp_tools() -> set[str]:
    async def listed() -> set[str]:
        return {tool.name for tool in await foundry_server().list_tools()}

    return anyio.run(listed)


def test_every_route_operation_and_tool_has_a_row(world: World) -> None:  # noqa: F811
    missing = (web_routes() | api_operations(world)) - set(MATRIX)
    assert not missing, f"routes and API operations without a row in {__name__}.MATRIX: {sorted(missing)}"
    tools = mcp_tools() - set(TOOLS)
    assert not tools, f"MCP tools without a row in {__name__}.TOOLS: {sorted(tools)}"


def _client(world: World, row: Row, who: str | None) -> Client:
    if who is None:
        return Client()
    if row.auth == "bearer":
        return Client(HTTP_AUTHORIZATION=f"Bearer {world.tokens[who]}")
    return world.web(who)


def _call(world: World, row: Row, who: str | None) -> tuple[int, str, str]:
    """(status, body, Location) of the row's request as ``who`` (None: anonymous)."""
    client = _client(world, row, who)
    body = row.body(world) if row.body else {}
    kwargs: dict[str, Any] = {"HTTP_ACCEPT": "application/json, text/event-stream"}
    if row.json_body:
        response = getattr(client, row.method)(
            row.url(world), json.dumps(body), content_type="application/json", **kwargs
        )
    elif row.method == "post":
        response = client.post(row.url(world), body, **kwargs)
    else:
        response = getattr(client, row.method)(row.url(world), **kwargs)
    content = b"".join(response.streaming_content) if response.streaming else response.content
    return response.status_code, content.decode(errors="replace"), response.get("Location", "")


def _check(world: World, key: str, row: Row) -> None:
    status, _, location = _call(world, row, None)
    if row.anonymous == LOGIN:
        assert status == 302 and location.startswith("/accounts/login/"), ("anonymous", status, location)
    elif row.anonymous == UNAUTHORIZED:
        assert status == 401, ("anonymous", status)
    elif row.anonymous == STAFF:
        assert status == 302 and "/admin/login/" in location, ("anonymous", status, location)
    shown = row.shows(world) if row.shows else None
    status, body, location = _call(world, row, "bob")
    if row.outsider == NOT_FOUND:
        assert status == 404, ("outsider", status, body[:200])
    elif row.outsider == HIDDEN:
        assert status == 200 and shown and shown not in body, ("outsider", status, body[:300])
    elif row.outsider == STAFF:
        assert status == 302 and "/admin/login/" in location, ("outsider", status, location)
    elif row.outsider == SAME:
        assert status == row.reader, ("outsider", status, body[:200])
    else:
        assert status == int(row.outsider), ("outsider", status, body[:200])
    if row.outsider != SAME and shown:
        assert shown not in body, ("outsider sees", shown)
    status, body, location = _call(world, row, "alice")
    assert status == row.reader, ("reader", status, body[:300], location)
    if shown:
        assert shown in body, ("reader does not see", shown, body[:300])


def test_anonymous_outsider_and_reader_on_every_row(world: World) -> None:  # noqa: F811
    Source.objects.filter(pk=world.a_source.pk).update(kind="pdf")  # the one kind /original serves
    failures = []
    for key in sorted(MATRIX, key=lambda k: (MATRIX[k].last, k)):
        try:
            _check(world, key, MATRIX[key])
        except AssertionError as exc:
            failures.append(f"{key!r}: {exc}")
    assert not failures, "\n".join(failures)


def _tool(world: World, who: str | None, name: str, arguments: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    client = Client(HTTP_AUTHORIZATION=f"Bearer {world.tokens[who]}") if who else Client()
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
    response = client.post(
        "/mcp", json.dumps(message), content_type="application/json", HTTP_ACCEPT="application/json, text/event-stream"
    )
    return response.status_code, (response.json().get("result") or {}) if response.status_code == 200 else {}


def test_every_mcp_tool_for_anonymous_outsider_and_reader(world: World) -> None:  # noqa: F811
    failures = []
    for name, (arguments, outsider, shows) in sorted(TOOLS.items()):
        shown = shows(world)
        anonymous, _ = _tool(world, None, name, arguments(world))
        bob_status, bob = _tool(world, "bob", name, arguments(world))
        alice_status, alice = _tool(world, "alice", name, arguments(world))
        try:
            assert anonymous == 401, ("anonymous", anonymous)
            assert bob_status == 200 and shown not in json.dumps(bob), ("outsider sees", bob)
            if outsider == NOT_FOUND:
                assert bob["isError"] and "not found" in bob["content"][0]["text"], ("outsider", bob)
            else:
                assert not bob["isError"], ("outsider", bob)
            assert alice_status == 200 and not alice["isError"] and shown in json.dumps(alice), ("reader", alice)
        except (AssertionError, KeyError) as exc:
            failures.append(f"{name}: {exc!r}")
    assert not failures, "\n".join(failures)
