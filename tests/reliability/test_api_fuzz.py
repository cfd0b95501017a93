"""API fuzzing against a live ``foundry serve``: the JSON API by its OpenAPI schema (schemathesis), the
OpenAI-compatible ``/v1/`` and the MCP endpoint by hypothesis strategies of their request bodies.

The server is the one ``test_mcp_live.py`` starts (its own home; alice reads ``docs``, the
sample knowledge base; bob reads only ``secret``). Every generated request goes as bob and
anonymously: never a 5xx, every response matches what the schema declares for the
operation (status code, content type, body), anonymous calls get 401, and nothing bob gets
names or quotes a source of ``docs``. A bounded number of examples runs here;
``bench/api_fuzz.py`` runs more and docs/reliability.md has its figures.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.core.result import Ok
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.foundry_site.test_mcp_live import foundry_live
from tests.reliability import api_fuzz

pytestmark = pytest.mark.integration

# Per API operation and per endpoint below; bench/api_fuzz.py sets FOUNDRY_FUZZ_EXAMPLES for a longer run.
EXAMPLES = int(os.environ.get("FOUNDRY_FUZZ_EXAMPLES", "8"))
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
FUZZ_SETTINGS = settings(max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck))


@dataclass
class Live:
    url: str
    home: Path
    tokens: dict[str, str]

    def bearer(self, who: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[who]}"}


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    # No per-user query limit: the fuzzer asks many questions a minute; 429s are test_openai_live's business.
    with foundry_live(tmp_path_factory, "fuzz-home", 0) as (url, home, _, tokens):
        yield Live(url, home, tokens)


def test_api_operations_keep_their_schema_and_scope(live: Live) -> None:
    """Every operation of /api/v1/openapi.json, with requests schemathesis generates from it."""
    schema = schemathesis.openapi.from_url(f"{live.url}/api/v1/openapi.json", headers=live.bearer("bob"))
    operations = []
    for result in schema.get_all_operations():
        assert isinstance(result, Ok), result  # an operation schemathesis cannot read is a finding too
        operations.append(result.ok())
    failures = []
    for operation in operations:

        @FUZZ_SETTINGS
        @given(case=operation.as_strategy())
        def check(case: Any) -> None:
            as_bob = case.call(base_url=live.url, headers=live.bearer("bob"), timeout=300)
            case.validate_response(as_bob, checks=CHECKS)
            assert not api_fuzz.leaks(as_bob.text), api_fuzz.leaks(as_bob.text)
            url = f"{live.url}{case.formatted_path}"
            anonymous = requests.request(case.method, url, params=case.query, timeout=120, **api_fuzz.body_of(case))
            assert anonymous.status_code == 401, anonymous.status_code
            case.validate_response(anonymous, checks=CHECKS)

        try:
            check()
        except (Exception, BaseExceptionGroup) as exc:  # schemathesis raises a group of every failure it found
            failures.append(f"{operation.label}: {exc}")
    assert len(operations) >= 15 and not failures, "\n\n".join(failures)


@FUZZ_SETTINGS
@given(body=api_fuzz.chat_bodies())
def test_chat_completions_never_fail_or_leak(live: Live, body: Any) -> None:
    for headers in (live.bearer("bob"), {}):
        response = requests.post(f"{live.url}/v1/chat/completions", json=body, headers=headers, timeout=300)
        api_fuzz.check_openai_reply(response, anonymous=not headers)


@FUZZ_SETTINGS
@given(path=api_fuzz.model_paths())
def test_models_never_fail_or_leak(live: Live, path: str) -> None:
    for headers in (live.bearer("bob"), {}):
        response = requests.get(f"{live.url}/v1/{path}", headers=headers, timeout=60, allow_redirects=False)
        api_fuzz.check_openai_reply(response, anonymous=not headers)


@FUZZ_SETTINGS
@given(message=api_fuzz.mcp_messages())
def test_mcp_never_fails_or_leaks(live: Live, message: Any) -> None:
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    for auth in (live.bearer("bob"), {}):
        response = requests.post(f"{live.url}/mcp", data=json.dumps(message), headers={**headers, **auth}, timeout=300)
        api_fuzz.check_mcp_reply(response, anonymous=not auth)
