"""The MCP server in-process: the SDK's own client against ``foundry_server()``, and the /mcp WSGI bridge.

The tools run on worker threads with their own database connections, so these tests
use committed data (``transactional_db``). The live server and stdio are in
``test_mcp_live.py``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from django.test import Client as DjangoClient
from mcp import Client, MCPError

from foundry_site.mcp.server import ACTING_USER, foundry_server
from foundry_site.services.tokens import token_create, token_revoke
from generation.models import QueryLog
from sources.models import Source
from sources.services.collections import collection_create, collection_grant
from sources.services.ingest_jobs import knowledge_base_ingest

pytestmark = pytest.mark.django_db(transaction=True)

DOC = "# Falcon gateway\n\n## Sensor bus\n\nThe Falcon gateway connects up to 12 sensors to its RS-485 bus.\n"
QUESTION = "How many sensors can the Falcon gateway connect?"
JSONRPC_HEADERS = {"HTTP_ACCEPT": "application/json, text/event-stream"}


@pytest.fixture
def users(kb: Path, make_user: Callable[..., Any], foundry_config: Any, settings: Any) -> dict[str, Any]:
    settings.FOUNDRY_QUERY_RATE = 0
    foundry_config(retrieval={"min_chunks": 1})
    alice, bob = make_user("alice"), make_user("bob")
    collection_create(name="falcon")
    collection_grant(collection="falcon", username="alice")
    (kb / "falcon.md").write_text(DOC)
    knowledge_base_ingest(target=kb, collection="falcon")
    return {"alice": alice, "bob": bob}


def as_user(user: Any, session: Callable[[Client], Any]) -> Any:
    """Run ``session(client)`` with the SDK's in-process client, the server acting as ``user``."""

    async def main() -> Any:
        async with Client(foundry_server(), raise_exceptions=True) as client:
            return await session(client)

    token = ACTING_USER.set(user)
    try:
        return anyio.run(main)
    finally:
        ACTING_USER.reset(token)


def test_tools_have_schemas_and_descriptions(users: dict[str, Any]) -> None:
    async def session(client: Client) -> Any:
        return (await client.list_tools()).tools

    listed = {t.name: t for t in as_user(users["alice"], session)}
    assert set(listed) == {"search", "ask", "get_chunk", "list_collections", "list_sources"}
    search = listed["search"].input_schema
    assert search["required"] == ["query"] and search["properties"]["k"]["anyOf"][0]["maximum"] == 50
    assert listed["get_chunk"].input_schema["required"] == ["chunk_id"]
    assert all(len(t.description or "") > 60 for t in listed.values())


def test_bad_input_is_a_tool_error_and_the_server_keeps_serving(users: dict[str, Any]) -> None:
    async def session(client: Client) -> list[Any]:
        return [
            await client.call_tool("search", {"query": ""}),
            await client.call_tool("search", {"query": "bus", "collection": "nope"}),
            await client.call_tool("search", {"query": "bus", "k": 0}),
            await client.call_tool("get_chunk", {"chunk_id": 10**9}),
            await client.call_tool("search", {"query": QUESTION}),
        ]

    empty, unknown, bad_k, missing, fine = as_user(users["alice"], session)
    assert empty.is_error and "the query is empty" in empty.content[0].text
    assert unknown.is_error and "Collection 'nope' not found" in unknown.content[0].text
    assert bad_k.is_error and "greater than or equal to 1" in bad_k.content[0].text
    assert missing.is_error and f"Chunk {10**9} not found" in missing.content[0].text
    assert not fine.is_error and "12 sensors" in fine.structured_content["results"][0]["text"]
    assert "Traceback" not in str([empty, unknown, bad_k, missing])


def test_resources_are_the_users_readable_sources(users: dict[str, Any]) -> None:
    source = Source.objects.get()

    async def listing(client: Client) -> Any:
        return [r.uri for r in (await client.list_resources()).resources]

    async def read(client: Client) -> Any:
        return json.loads((await client.read_resource(f"foundry://source/{source.pk}")).contents[0].text)

    assert as_user(users["alice"], listing) == [f"foundry://source/{source.pk}"]
    assert "12 sensors" in as_user(users["alice"], read)["chunks"][0]["text"]

    async def refused(client: Client) -> str:
        try:
            await client.read_resource(f"foundry://source/{source.pk}")
        except MCPError as exc:
            return str(exc)
        return "read"

    assert as_user(users["bob"], listing) == []
    assert as_user(users["bob"], refused) == f"Source '{source.pk}' not found."


def test_http_endpoint_needs_a_valid_bearer_token(users: dict[str, Any]) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}})
    anonymous = DjangoClient().post("/mcp", body, content_type="application/json", **JSONRPC_HEADERS)
    assert anonymous.status_code == 401 and "Bearer" in anonymous["WWW-Authenticate"]
    assert (
        anonymous.json()["detail"].startswith("Authentication required")
        and "foundry tokens create" in anonymous.json()["detail"]
    )
    new = token_create(username="alice")
    token_revoke(token_id=new.token.pk)
    revoked = DjangoClient().post(
        "/mcp", body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {new.plain}", **JSONRPC_HEADERS
    )
    assert revoked.status_code == 401 and revoked.json()["detail"].startswith("The bearer token sent was revoked")


def test_http_endpoint_runs_the_sdk_transport_as_the_tokens_user(users: dict[str, Any]) -> None:
    client = DjangoClient(HTTP_AUTHORIZATION=f"Bearer {token_create(username='bob').plain}", **JSONRPC_HEADERS)
    call = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": "search", "arguments": {"query": QUESTION}},
    }
    response = client.post("/mcp", json.dumps(call), content_type="application/json")
    assert response.status_code == 200 and response["Content-Type"].startswith("application/json")
    result = response.json()["result"]
    assert result["isError"] is True and "cannot read any collection" in result["content"][0]["text"]
    listed = client.post(
        "/mcp", json.dumps({"jsonrpc": "2.0", "id": 8, "method": "tools/list"}), content_type="application/json"
    )
    assert {t["name"] for t in listed.json()["result"]["tools"]} >= {"search", "ask"}
    assert not QueryLog.objects.exists()


def test_http_endpoint_serves_post_only_and_reports_protocol_errors(users: dict[str, Any]) -> None:
    """GET would open a never-ending event stream in the SDK: a stateless endpoint answers 405 instead."""
    client = DjangoClient(HTTP_AUTHORIZATION=f"Bearer {token_create(username='alice').plain}", **JSONRPC_HEADERS)
    for method in ("get", "delete", "put"):
        response = getattr(client, method)("/mcp")
        assert response.status_code == 405 and response["Allow"] == "POST", method
    notified = client.post(
        "/mcp", json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}), content_type="application/json"
    )
    assert notified.status_code == 202
    garbled = client.post("/mcp", "not json", content_type="application/json")
    assert garbled.status_code == 400 and garbled.json()["error"]["code"] == -32700
    unknown = client.post(
        "/mcp",
        json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "nope", "arguments": {}}}),
        content_type="application/json",
    )
    assert unknown.json()["result"]["isError"] is True and "Unknown tool: nope" in unknown.content.decode()
