"""The MCP server end to end, through the SDK's own clients: Streamable HTTP against a live
``foundry serve`` (gunicorn, its own FOUNDRY_HOME, real MiniLM embeddings and the shipped
answering model) and ``foundry mcp`` over stdio as a subprocess.

alice, carol and rita read ``docs`` (knowledge_base/); bob reads only ``secret``. Every tool and
the resources are called; bob never sees ``docs``; every bad input is a tool error and
the server keeps serving.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import anyio
import httpx2
import pytest
from django.conf import settings
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from tests.reliability.test_load import foundry_argv, free_port, ingest_env, server_env, wait_until_up

pytestmark = pytest.mark.integration

T = TypeVar("T")
RATE = 20  # FOUNDRY_QUERY_RATE of the live server: searches and asks a user may make per minute
QUESTION = "How many sensors can be connected to the RS-485 bus?"
SECRET_DOC = "# Project Kestrel\n\nProject Kestrel ships the RS-485 sensor hub with 64 sensor ports.\n"

SETUP = """
import json, sys
import django
django.setup()
from django.core.management import call_command
from django.contrib.auth.models import User
from foundry_site.services.tokens import token_create
from sources.services.collections import collection_create, collection_grant
from sources.services.ingest_jobs import knowledge_base_ingest

call_command("migrate", verbosity=0, interactive=False)
for name, readers in (("docs", ["alice", "carol", "rita"]), ("secret", ["bob"])):
    collection_create(name=name)
    for user in readers:
        User.objects.get_or_create(username=user)
        collection_grant(collection=name, username=user)
knowledge_base_ingest(target=sys.argv[1], collection="docs")
knowledge_base_ingest(target=sys.argv[2], collection="secret")
users = ("alice", "bob", "carol", "rita")
print(json.dumps({user: token_create(username=user, name="mcp test").plain for user in users}))
"""


@dataclass
class Live:
    url: str
    home: Path
    env: dict[str, str]
    tokens: dict[str, str]

    def http(self, who: str, body: Callable[[Client], Awaitable[T]]) -> T:
        """``body(client)`` with the SDK's Streamable HTTP client, authenticated as ``who``."""

        async def main() -> T:
            headers = {"Authorization": f"Bearer {self.tokens[who]}"}
            async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=600)) as http:
                async with Client(streamable_http_client(f"{self.url}/mcp", http_client=http)) as client:
                    return await body(client)

        return anyio.run(main)

    def stdio(self, body: Callable[[Client], Awaitable[T]], *args: str, token: str | None = None) -> T:
        """``body(client)`` with the SDK's stdio client, which starts ``foundry mcp ARGS`` as a subprocess."""
        env = {**self.env, **({"FOUNDRY_TOKEN": token} if token else {})}
        params = StdioServerParameters(
            command=sys.executable, args=foundry_argv("mcp", *args)[1:], env=env, cwd=str(settings.BASE_DIR)
        )

        async def main() -> T:
            async with Client(params, read_timeout_seconds=600) as client:
                return await body(client)

        return anyio.run(main)

    def log_rows(self) -> list[dict[str, Any]]:
        with sqlite3.connect(f"file:{self.home / 'foundry.sqlite3'}?mode=ro", uri=True, timeout=60) as db:
            db.row_factory = sqlite3.Row
            return [
                dict(r)
                for r in db.execute(
                    "SELECT q.*, u.username FROM retrieval_querylog q "
                    "JOIN auth_user u ON u.id = q.user_id ORDER BY q.id"
                )
            ]


@contextlib.contextmanager
def foundry_live(
    tmp_path_factory: pytest.TempPathFactory, name: str, rate: int
) -> Iterator[tuple[str, Path, dict[str, str], dict[str, str]]]:
    """A real `foundry serve` on 127.0.0.1 over a home of its own (the sample knowledge base readable by alice,
    carol and rita, a secret collection by bob): its URL, home, environment and each user's token. On the way
    out the server's log must hold no traceback."""
    home = tmp_path_factory.mktemp(name)
    (home / "secret").mkdir()
    (home / "secret" / "kestrel.md").write_text(SECRET_DOC)
    env = ingest_env({**server_env(home), "FOUNDRY_QUERY_RATE": str(rate)}, home)  # no source summaries
    done = subprocess.run(
        [sys.executable, "-c", SETUP, str(settings.BASE_DIR / "knowledge_base"), str(home / "secret")],
        env=env,
        cwd=settings.BASE_DIR,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    tokens = json.loads(done.stdout.strip().splitlines()[-1])
    port = free_port()
    with (home / "serve.log").open("w") as out:
        proc = subprocess.Popen(
            foundry_argv("serve", "--port", str(port), "--workers", "1"),
            env=env,
            cwd=settings.BASE_DIR,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until_up(url, proc)
        yield url, home, env, tokens
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
    log = (home / "serve.log").read_text()
    assert "Traceback" not in log, log[-3000:]


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    with foundry_live(tmp_path_factory, "mcp-home", RATE) as (url, home, env, tokens):
        yield Live(url, home, env, tokens)


def data(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    return result.structured_content


def error(result: Any) -> str:
    assert result.is_error, result.structured_content
    return result.content[0].text


async def every_tool(client: Client) -> dict[str, Any]:
    seen: dict[str, Any] = {"tools": {t.name for t in (await client.list_tools()).tools}}
    seen["resources"] = [r.uri for r in (await client.list_resources()).resources]
    seen["resource"] = json.loads((await client.read_resource(seen["resources"][0])).contents[0].text)
    seen["collections"] = data(await client.call_tool("list_collections", {}))["collections"]
    seen["sources"] = data(await client.call_tool("list_sources", {"collection": "docs"}))["sources"]
    seen["search"] = data(await client.call_tool("search", {"query": QUESTION, "k": 5}))
    first = seen["search"]["results"][0]["chunk_id"]
    seen["chunk"] = data(await client.call_tool("get_chunk", {"chunk_id": first, "neighbours": 1}))
    seen["refused"] = data(await client.call_tool("ask", {"question": "Who won the 1998 football world cup?"}))
    return seen


def check_every_tool(seen: dict[str, Any]) -> None:
    assert seen["tools"] == {"search", "ask", "get_chunk", "list_collections", "list_sources"}
    assert len(seen["resources"]) == 4 and all(u.startswith("foundry://source/") for u in seen["resources"])
    assert seen["resource"]["chunks"] and seen["resource"]["source"]["collection"] == "docs"
    assert [c["name"] for c in seen["collections"]] == ["docs"]
    assert {s["name"] for s in seen["sources"]} == {
        "ax200-datasheet.pdf",
        "ax200-specs.json",
        "ax200-user-manual.md",
        "release-notes.txt",
    }
    search = seen["search"]
    assert search["gate"]["passed"] and 0 < len(search["results"]) <= 5
    assert any("RS-485" in r["text"] for r in search["results"]) and "Kestrel" not in json.dumps(search)
    assert seen["chunk"]["chunk"]["chunk_id"] == search["results"][0]["chunk_id"] and seen["chunk"]["source"]["name"]
    assert seen["refused"]["answer_class"] == "no_evidence" and seen["refused"]["refusal"] == "gate"


def test_http_every_tool_and_resource(live: Live) -> None:
    check_every_tool(live.http("alice", every_tool))
    rows = [r for r in live.log_rows() if r["username"] == "alice"]
    assert [r["kind"] for r in rows][-2:] == ["search", "answer"]
    assert rows[-2]["answer"] == "" and rows[-2]["question"] == QUESTION


def test_http_ask_answers_from_the_sources_with_citations(live: Live) -> None:
    async def ask(client: Client) -> dict[str, Any]:
        return data(await client.call_tool("ask", {"question": QUESTION, "collection": "docs"}))

    answer = live.http("rita", ask)
    assert answer["answer_class"] in ("normal", "low_confidence", "no_evidence") and answer["gate"]["passed"]
    if answer["answer_class"] != "no_evidence":  # the shipped model may write nothing the grounding check keeps
        assert answer["citations"] and all(c["source"].startswith(("ax200", "release")) for c in answer["citations"])


def test_http_other_users_collection_is_invisible(live: Live) -> None:
    async def alice_ids(client: Client) -> dict[str, Any]:
        search = data(await client.call_tool("search", {"query": QUESTION}))
        return {"chunk": search["results"][0]["chunk_id"], "uri": (await client.list_resources()).resources[0].uri}

    async def bob(client: Client) -> dict[str, Any]:
        seen = {
            "collections": data(await client.call_tool("list_collections", {}))["collections"],
            "sources": data(await client.call_tool("list_sources", {}))["sources"],
            "resources": [r.uri for r in (await client.list_resources()).resources],
            "search": data(await client.call_tool("search", {"query": QUESTION})),
            "in_docs": error(await client.call_tool("search", {"query": QUESTION, "collection": "docs"})),
            "ask_docs": error(await client.call_tool("ask", {"question": QUESTION, "collection": "docs"})),
            "chunk": error(await client.call_tool("get_chunk", {"chunk_id": theirs["chunk"]})),
        }
        try:
            await client.read_resource(theirs["uri"])
            seen["resource"] = "read"
        except MCPError as exc:
            seen["resource"] = str(exc)
        return seen

    theirs = live.http("alice", alice_ids)
    seen = live.http("bob", bob)
    assert [c["name"] for c in seen["collections"]] == ["secret"]
    assert [s["name"] for s in seen["sources"]] == ["kestrel.md"] and len(seen["resources"]) == 1
    assert theirs["uri"] not in seen["resources"]
    assert {r["source"] for r in seen["search"]["results"]} == {"kestrel.md"}
    assert "Collection 'docs' not found" in seen["in_docs"] and "Collection 'docs' not found" in seen["ask_docs"]
    assert f"Chunk {theirs['chunk']} not found" in seen["chunk"] and "not found" in seen["resource"]


def test_http_bad_input_is_a_tool_error_and_the_server_keeps_serving(live: Live) -> None:
    async def bad(client: Client) -> dict[str, Any]:
        return {
            "empty": error(await client.call_tool("search", {"query": "   "})),
            "long": error(await client.call_tool("search", {"query": "bus " * 1001})),
            "k0": error(await client.call_tool("search", {"query": "bus", "k": 0})),
            "k_text": error(await client.call_tool("search", {"query": "bus", "k": "many"})),
            "collection": error(await client.call_tool("search", {"query": "bus", "collection": "nope"})),
            "ask_empty": error(await client.call_tool("ask", {"question": ""})),
            "neighbours": error(await client.call_tool("get_chunk", {"chunk_id": 1, "neighbours": 9})),
            "after": data(await client.call_tool("list_collections", {})),
        }

    seen = live.http("alice", bad)
    assert "the query is empty" in seen["empty"] and "the limit is 4000" in seen["long"]
    assert "k" in seen["k0"] and "greater than or equal to 1" in seen["k0"]
    assert "valid integer" in seen["k_text"] and "Collection 'nope' not found" in seen["collection"]
    assert "the question is empty" in seen["ask_empty"] and "less than or equal to 5" in seen["neighbours"]
    assert [c["name"] for c in seen["after"]["collections"]] == ["docs"]
    assert "Traceback" not in json.dumps(seen)


def test_http_rate_limit_is_a_tool_error(live: Live) -> None:
    async def hammer(client: Client) -> list[Any]:
        # The limit counts per clock minute: calls that straddle a minute boundary need up to twice the rate.
        results = []
        while len(results) < 2 * RATE + 2 and not (results and results[-1].is_error):
            results.append(await client.call_tool("search", {"query": f"sensor bus {len(results)}", "k": 1}))
        results.append(await client.call_tool("list_collections", {}))
        return results

    results = live.http("rita", hammer)
    assert "Too many queries" in error(results[-2]) and "Try again in" in error(results[-2])
    assert not any(r.is_error for r in results[:-2]) and data(results[-1])["collections"]


def test_http_concurrent_clients(live: Live) -> None:
    """gunicorn's threads each run their request's own event loop: concurrent sessions do not interfere."""

    async def session(client: Client) -> list[bool]:
        calls = [await client.call_tool("search", {"query": f"RS-485 sensor wiring {i}", "k": 2}) for i in range(3)]
        calls.append(await client.call_tool("list_sources", {}))
        return [c.is_error for c in calls]

    with ThreadPoolExecutor(4) as pool:
        outcomes = list(pool.map(lambda _: live.http("carol", session), range(4)))
    assert outcomes == [[False] * 4] * 4
    assert sum(1 for r in live.log_rows() if r["username"] == "carol" and r["kind"] == "search") == 12


def test_http_without_a_token_is_401(live: Live) -> None:
    request = urllib.request.Request(
        f"{live.url}/mcp",
        data=b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}',
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    assert refused.value.code == 401 and "Bearer" in refused.value.headers["WWW-Authenticate"]


def test_stdio_every_tool_as_the_token_user(live: Live) -> None:
    check_every_tool(live.stdio(every_tool, token=live.tokens["alice"]))


def test_stdio_as_user_is_scoped_and_bad_input_is_an_error(live: Live) -> None:
    async def bob(client: Client) -> dict[str, Any]:
        return {
            "collections": data(await client.call_tool("list_collections", {}))["collections"],
            "docs": error(await client.call_tool("list_sources", {"collection": "docs"})),
            "empty": error(await client.call_tool("search", {"query": ""})),
            "k": error(await client.call_tool("search", {"query": "bus", "k": 51})),
            "search": data(await client.call_tool("search", {"query": QUESTION})),
        }

    seen = live.stdio(bob, "--as", "bob")
    assert [c["name"] for c in seen["collections"]] == ["secret"]
    assert "Collection 'docs' not found" in seen["docs"] and "the query is empty" in seen["empty"]
    assert "less than or equal to 50" in seen["k"]
    assert {r["source"] for r in seen["search"]["results"]} == {"kestrel.md"}


def test_stdio_without_a_user_exits_with_the_fix(live: Live) -> None:
    env = {k: v for k, v in live.env.items() if k != "FOUNDRY_TOKEN"}
    done = subprocess.run(
        foundry_argv("mcp"),
        env=env,
        cwd=settings.BASE_DIR,
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode != 0 and "FOUNDRY_TOKEN" in done.stderr and "--as USER" in done.stderr
    bad = subprocess.run(
        foundry_argv("mcp"),
        env={**env, "FOUNDRY_TOKEN": "fdy_not-a-token"},
        cwd=settings.BASE_DIR,
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    assert bad.returncode != 0 and "not a valid API token" in bad.stderr and done.stdout == bad.stdout == ""
