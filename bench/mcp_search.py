"""Latency of the MCP ``search`` tool on knowledge_base/, warm and in-process.

    PYTHONPATH=. .venv/bin/python bench/mcp_search.py [--rounds 10]

Ingests knowledge_base/ into a throw-away FOUNDRY_HOME (summaries off), warms the
embedding model, then runs the benchmark questions (8 answerable, 4 out of corpus)
``--rounds`` times through three paths and prints P50/P95/max in ms:

- ``tool``: ``foundry_site.mcp.tools.search`` called directly (retrieval, gate, audit row);
- ``sdk``: a ``tools/call`` through the SDK's in-process client (adds argument validation,
  the worker-thread hop with its database connection, result conversion);
- ``http``: a JSON-RPC POST to /mcp through Django's test client (adds the WSGI→ASGI
  bridge: token check, a short-lived event loop and the SDK's stateless transport).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
os.environ.update(
    FOUNDRY_HOME=tempfile.mkdtemp(prefix="foundry-mcpbench-"), DJANGO_SETTINGS_MODULE="foundry_site.settings"
)
sys.path.insert(0, str(ROOT))

import anyio  # noqa: E402
import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.contrib.auth.models import User  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.test import Client as DjangoClient  # noqa: E402
from mcp import Client  # noqa: E402

from bench._common import machine_line  # noqa: E402
from bench.query_latency import IN_CORPUS, OUT_OF_CORPUS, pct  # noqa: E402
from foundry_site.mcp import tools  # noqa: E402
from foundry_site.mcp.server import ACTING_USER, foundry_server  # noqa: E402
from foundry_site.services.tokens import token_create  # noqa: E402
from sources.models import Collection  # noqa: E402
from sources.services.ingest_jobs import knowledge_base_ingest  # noqa: E402
from tests.conftest import config_with  # noqa: E402

QUESTIONS = IN_CORPUS + OUT_OF_CORPUS


def timed(call: Callable[[str], object], rounds: int) -> list[float]:
    times = []
    for _ in range(rounds):
        for question in QUESTIONS:
            start = time.perf_counter()
            call(question)
            times.append((time.perf_counter() - start) * 1000)
    return times


def sdk_times(user: User, rounds: int) -> list[float]:
    async def main() -> list[float]:
        times = []
        async with Client(foundry_server()) as client:
            for _ in range(rounds):
                for question in QUESTIONS:
                    start = time.perf_counter()
                    result = await client.call_tool("search", {"query": question})
                    times.append((time.perf_counter() - start) * 1000)
                    assert not result.is_error, result.content
        return times

    ACTING_USER.set(user)
    return anyio.run(main)


def http_call(token: str) -> Callable[[str], object]:
    client = DjangoClient(HTTP_AUTHORIZATION=f"Bearer {token}", HTTP_ACCEPT="application/json, text/event-stream")

    def call(question: str) -> object:
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "search", "arguments": {"query": question}},
        }
        response = client.post("/mcp", json.dumps(body), content_type="application/json")
        assert response.status_code == 200 and not response.json()["result"]["isError"], response.content[:300]
        return response

    return call


def summary(times: list[float]) -> dict[str, float]:
    return {"n": len(times), "p50": pct(times, 0.5), "p95": pct(times, 0.95), "max": round(max(times), 1)}


def main() -> dict:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=10)
    rounds = parser.parse_args().rounds
    settings.FOUNDRY = config_with(settings.FOUNDRY, ingest={"summary_model": "none"})
    settings.FOUNDRY_QUERY_RATE = 0
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]  # Django's test client's host
    call_command("migrate", verbosity=0)
    knowledge_base_ingest(target=ROOT / "knowledge_base")
    user = User.objects.create_user("bench")
    for collection in Collection.objects.all():
        collection.readers.add(user)
    token = token_create(username="bench").plain
    tools.search(user, query="warm-up: what is the AX-200?")  # load the embedding model outside the timings
    results = {
        "tool": summary(timed(lambda q: tools.search(user, query=q), rounds)),
        "sdk": summary(sdk_times(user, rounds)),
        "http": summary(timed(http_call(token), rounds)),
    }
    return {"machine": machine_line(), "questions": len(QUESTIONS), "rounds": rounds, "ms": results}


if __name__ == "__main__":
    print(json.dumps(main(), indent=2))
