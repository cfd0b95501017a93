"""Request strategies and reply checks of the API fuzzer, shared by ``test_api_fuzz.py`` and ``bench/api_fuzz.py``.

The live server of ``tests/foundry_site/test_mcp_live.py`` holds two collections: ``docs`` (the sample
knowledge base, alice's) and ``secret`` (bob's). The fuzzer calls as bob, so any reply that names a
file of the knowledge base has reached another user's collection.
"""

from __future__ import annotations

import json
import posixpath
from functools import cache
from typing import Any

import requests
from django.conf import settings
from hypothesis import strategies as st

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12,
)
QUESTIONS = st.sampled_from(["How many sensors can be connected?", "What is the supply voltage?", "", " ", "\x00"])
TEXT = QUESTIONS | st.text(max_size=200)


@cache
def other_users_files() -> tuple[str, ...]:
    """The names of the files in alice's collection (the sample knowledge base), which bob must never see."""
    return tuple(sorted(p.name for p in (settings.BASE_DIR / "knowledge_base").iterdir() if p.is_file()))


def leaks(text: str) -> list[str]:
    return [name for name in other_users_files() if name in text]


def body_of(case: Any) -> dict[str, Any]:
    """The request body of a schemathesis case as ``requests`` keyword arguments."""
    kwargs = case.as_transport_kwargs(base_url="http://unused")
    return {k: kwargs[k] for k in ("json", "data", "files") if k in kwargs}


# --------------------------------------------------------------------------- the OpenAI-compatible API


def chat_bodies() -> st.SearchStrategy[Any]:
    message = st.fixed_dictionaries(
        {"role": st.sampled_from(["user", "assistant", "system", "tool", "developer"]) | st.text(max_size=10)},
        optional={
            "content": TEXT
            | st.none()
            | st.integers()
            | st.lists(st.fixed_dictionaries({"type": st.sampled_from(["text", "image_url"]), "text": TEXT})),
            "name": st.text(max_size=10),
        },
    )
    request = st.fixed_dictionaries(
        {
            "model": st.sampled_from(["foundry", "foundry/secret", "foundry/docs", "gpt-4o", ""])
            | st.text(max_size=20),
            "messages": st.lists(message, max_size=5),
        },
        optional={
            "stream": st.booleans() | st.none() | st.text(max_size=4),
            "stream_options": st.fixed_dictionaries({"include_usage": st.booleans()}) | JSON_VALUES,
            "temperature": st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=4),
            "max_tokens": st.integers() | st.none(),
            "n": st.integers(-2, 5),
            "tools": JSON_VALUES,
            "user": st.text(max_size=10),
        },
    )
    return request | JSON_VALUES


def _under_v1(path: str) -> bool:
    """Whether ``/v1/<path>`` stays under /v1/ once its dot segments are resolved (as the HTTP client resolves them):
    "models/../.." is a request for the site's root, not one of /v1/'s."""
    resolved = posixpath.normpath(f"/v1/{path}")
    return resolved == "/v1" or resolved.startswith("/v1/")


def model_paths() -> st.SearchStrategy[str]:
    names = st.sampled_from(["foundry", "foundry/secret", "foundry/docs", "gpt-4o", "..", "%2e%2e", "foundry/../docs"])
    return st.one_of(
        st.just("models"),
        (names | st.text(alphabet=st.characters(codec="ascii", exclude_characters="?#"), max_size=30)).map(
            lambda name: f"models/{name}"
        ),
        st.sampled_from(["embeddings", "completions", "chat", "chat/completions/x", "files"]),
    ).filter(_under_v1)


def check_openai_reply(response: requests.Response, *, anonymous: bool) -> None:
    """A reply of /v1/: never a 5xx; 401 without a token; JSON in OpenAI's error shape or a success body (or an event
    stream of JSON chunks ending in [DONE]); nothing of another user's collection."""
    where = (response.request.method, response.request.url, response.status_code, response.text[:300])
    assert response.status_code < 500, where
    assert not leaks(response.text), where
    if anonymous:
        assert response.status_code == 401, where
    if response.headers.get("Content-Type", "").startswith("text/event-stream"):
        assert response.status_code == 200, where
        events = [line[6:] for line in response.text.splitlines() if line.startswith("data: ")]
        assert events and events[-1] == "[DONE]", where
        for event in events[:-1]:
            assert isinstance(json.loads(event), dict), where
        return
    assert response.headers.get("Content-Type", "").startswith("application/json"), where
    body = response.json()
    if response.status_code >= 400:
        error = body["error"]
        assert isinstance(error["message"], str) and error["message"] and isinstance(error["type"], str), where
    else:
        assert body["object"] in ("chat.completion", "list", "model"), where


# --------------------------------------------------------------------------- MCP


@cache
def mcp_tool_names() -> tuple[str, ...]:
    """The tools of Foundry's MCP server, read from the server itself."""
    import anyio

    from foundry_site.mcp.server import foundry_server

    async def listed() -> tuple[str, ...]:
        return tuple(sorted(tool.name for tool in await foundry_server().list_tools()))

    return anyio.run(listed)


def mcp_messages() -> st.SearchStrategy[Any]:
    ids = st.integers(0, 2**31) | st.text(max_size=8)
    arguments = st.dictionaries(
        st.sampled_from(["query", "question", "collection", "k", "chunk_id", "neighbours"]) | st.text(max_size=10),
        QUESTIONS | st.sampled_from(["secret", "docs", 1, 5, 0, -1, 2**63]) | JSON_VALUES,
        max_size=4,
    )
    call = st.fixed_dictionaries(
        {
            "jsonrpc": st.just("2.0"),
            "id": ids,
            "method": st.just("tools/call"),
            "params": st.fixed_dictionaries(
                {"name": st.sampled_from(mcp_tool_names()) | st.text(max_size=12), "arguments": arguments}
            ),
        }
    )
    uris = st.sampled_from(["foundry://source/", "foundry://source/..%2F", "file:///etc/passwd", ""]).flatmap(
        lambda head: (st.integers(-1, 50).map(str) | st.text(max_size=10)).map(lambda tail: head + tail)
    )
    read = st.fixed_dictionaries(
        {
            "jsonrpc": st.just("2.0"),
            "id": ids,
            "method": st.just("resources/read"),
            "params": st.fixed_dictionaries({"uri": uris}),
        }
    )
    other = st.fixed_dictionaries(
        {
            "jsonrpc": st.sampled_from(["2.0", "1.0"]),
            "method": st.sampled_from(
                ["tools/list", "resources/list", "resources/templates/list", "ping", "initialize"]
            )
            | st.text(max_size=20),
        },
        optional={"id": ids | st.none(), "params": JSON_VALUES},
    )
    return st.one_of(call, call, read, other, JSON_VALUES)


def check_mcp_reply(response: requests.Response, *, anonymous: bool) -> None:
    """A reply of /mcp: never a 5xx; 401 without a token; a JSON-RPC result or error (or an accepted notification, or a
    4xx for a message that is not JSON-RPC); nothing of another user's collection."""
    where = (response.request.body, response.status_code, response.text[:300])
    assert response.status_code < 500, where
    assert not leaks(response.text), where
    if anonymous:
        assert response.status_code == 401, where
        return
    if response.status_code == 200 and response.text:
        reply = response.json()
        assert reply.get("jsonrpc") == "2.0" and ("result" in reply or "error" in reply), where
