"""Access control over the MCP server (/mcp): user B never reaches user A's collections, sources or chunks.

A sibling of ``test_access_control.py`` for the MCP tools and resources. A and B each
read one private collection holding an answer to the same question, with a different
fact. B calls every tool and resource through the real Streamable HTTP transport (the
/mcp bridge, in-process), names A's collection, and guesses every one of A's chunk and
source ids: each answer is "not found" or holds only B's own material, and B's audit
rows reference none of A's chunks. The tools run on worker threads with their own
database connections, so the data is committed (``transactional_db``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from foundry_site.services.tokens import token_create
from generation.models import QueryLog
from sources.models import Chunk, Source
from sources.services.collections import collection_create, collection_grant
from sources.services.ingest_jobs import knowledge_base_ingest
from tests.conftest import ScriptedLLM
from tests.generation.conftest import echo_reply

pytestmark = pytest.mark.django_db(transaction=True)

QUESTION = "How many sensors can the Falcon gateway connect to its RS-485 bus?"
A_DOC = (
    "# Falcon gateway (alpha team)\n\n## Sensor bus\n\nThe Falcon gateway connects up to 12 sensors to its "
    "RS-485 bus.\n\n## Power\n\nThe alpha Falcon draws 3 W from 24 V DC.\n"
)
B_DOC = (
    "# Falcon gateway (beta team)\n\n## Sensor bus\n\nThe Falcon gateway connects up to 40 sensors to its RS-485 bus.\n"
)
A_MARKS = ("12 sensors", "alpha", "a-private")


@dataclass
class Pair:
    tokens: dict[str, str]
    a_chunks: list[int]
    a_sources: list[int]

    def rpc(self, who: str, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """One JSON-RPC call to /mcp as ``who``; the JSON-RPC ``result`` or ``error`` object."""
        client = Client(
            HTTP_AUTHORIZATION=f"Bearer {self.tokens[who]}", HTTP_ACCEPT="application/json, text/event-stream"
        )
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params or {}}
        response = client.post("/mcp", json.dumps(body), content_type="application/json")
        assert response.status_code == 200, response.content[:300]
        reply = response.json()
        return reply.get("result") or reply["error"]

    def tool(self, who: str, name: str, **arguments: Any) -> dict[str, Any]:
        return self.rpc(who, "tools/call", {"name": name, "arguments": arguments})


@pytest.fixture
def pair(
    kb: Path, make_user: Callable[..., Any], foundry_config: Any, scripted_llm: ScriptedLLM, settings: Any
) -> Pair:
    settings.FOUNDRY_QUERY_RATE = 0
    foundry_config(retrieval={"min_chunks": 1})
    scripted_llm.reply = echo_reply
    for name, user, text in (("a-private", "alice", A_DOC), ("b-private", "bob", B_DOC)):
        make_user(user)
        collection_create(name=name)
        collection_grant(collection=name, username=user)
        (kb / name).mkdir()
        (kb / name / f"{name}.md").write_text(text)
        knowledge_base_ingest(target=kb / name, collection=name)
    a_sources = list(Source.objects.filter(collection__name="a-private").values_list("pk", flat=True))
    return Pair(
        tokens={u: token_create(username=u).plain for u in ("alice", "bob")},
        a_chunks=list(Chunk.objects.filter(source_id__in=a_sources).values_list("pk", flat=True)),
        a_sources=a_sources,
    )


def leaks(payload: Any) -> list[str]:
    text = json.dumps(payload)
    return [mark for mark in A_MARKS if mark in text]


def test_the_owner_reaches_their_own_material(pair: Pair) -> None:
    """The control: the same calls as A do reach A's material, so B's empty answers mean something."""
    found = pair.tool("alice", "search", query=QUESTION)["structuredContent"]
    assert "12 sensors" in found["results"][0]["text"]
    assert pair.tool("alice", "get_chunk", chunk_id=pair.a_chunks[0])["isError"] is False
    listed = [r["uri"] for r in pair.rpc("alice", "resources/list")["resources"]]
    assert listed == [f"foundry://source/{pk}" for pk in pair.a_sources]
    assert "12 sensors" in pair.tool("alice", "ask", question=QUESTION)["structuredContent"]["answer"]


def test_other_user_sees_nothing_of_a_through_any_tool(pair: Pair) -> None:
    seen = {
        "search": pair.tool("bob", "search", query=QUESTION, k=50),
        "ask": pair.tool("bob", "ask", question=QUESTION),
        "collections": pair.tool("bob", "list_collections"),
        "sources": pair.tool("bob", "list_sources"),
        "resources": pair.rpc("bob", "resources/list"),
    }
    assert not leaks(seen), leaks(seen)
    assert "40 sensors" in seen["search"]["structuredContent"]["results"][0]["text"]
    assert "40 sensors" in seen["ask"]["structuredContent"]["answer"]
    for name, arguments in (("search", {"query": QUESTION}), ("ask", {"question": QUESTION}), ("list_sources", {})):
        refused = pair.tool("bob", name, collection="a-private", **arguments)
        assert refused["isError"] and refused["content"][0]["text"].endswith(
            "Collection 'a-private' not found. list_collections names the collections you can read."
        )


def test_guessed_ids_are_not_found(pair: Pair) -> None:
    for chunk_id in [*pair.a_chunks, 0, -1, 2**62]:
        refused = pair.tool("bob", "get_chunk", chunk_id=chunk_id, neighbours=5)
        assert refused["isError"] and f"Chunk {chunk_id} not found" in refused["content"][0]["text"], refused
    for source_id in [*pair.a_sources, "0", "-1", "..%2F1", "1%20OR%201=1"]:
        refused = pair.rpc("bob", "resources/read", {"uri": f"foundry://source/{source_id}"})
        assert "contents" not in refused and not leaks(refused), refused


def test_other_users_audit_rows_reference_none_of_as_chunks(pair: Pair) -> None:
    pair.tool("bob", "search", query=QUESTION, k=50)
    pair.tool("bob", "ask", question=QUESTION)
    rows = QueryLog.objects.filter(user__username="bob")
    assert sorted(r.kind for r in rows) == ["answer", "search"]
    referenced = {c["chunk_id"] for r in rows for c in r.citations}
    referenced |= {hit[0] for r in rows for hits in r.channels.values() for hit in hits}
    assert referenced and not referenced & set(pair.a_chunks)
