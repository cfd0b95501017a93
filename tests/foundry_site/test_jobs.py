"""Transient-error classification and the retry decorator (no broker needed)."""

from __future__ import annotations

import pytest
from django.db import OperationalError
from redis.exceptions import ConnectionError as RedisConnectionError

from core import llm
from core.jobs import TransientError, failure_reason, is_transient, retry_transient


@pytest.mark.parametrize(
    "exc, transient",
    [
        (llm.LLMError("timed out", model="m", transient=True), True),
        (llm.LLMError("bad request", model="m"), False),
        (OperationalError("database is locked"), True),
        (OperationalError("no such table: sources_source"), False),
        (RedisConnectionError("refused"), True),
        (ValueError("bug"), False),
        (RuntimeError("extractor crashed"), False),
    ],
)
def test_is_transient(exc: Exception, transient: bool) -> None:
    assert is_transient(exc) is transient


def test_retry_transient_wraps_only_transient_errors() -> None:
    @retry_transient
    def locked() -> None:
        raise OperationalError("database is locked")

    @retry_transient
    def buggy() -> None:
        raise KeyError("x")

    with pytest.raises(TransientError, match="database is locked"):
        locked()
    with pytest.raises(KeyError):
        buggy()


def test_failure_reason_names_unexpected_types() -> None:
    assert failure_reason(RuntimeError("boom")) == "RuntimeError: boom"
    assert failure_reason(llm.LLMError("empty completion", model="m")) == "empty completion"


def test_heartbeat_repeats_the_latest_stage_until_closed() -> None:
    import threading

    from core.jobs import Heartbeat

    sent: list[str] = []
    twice = threading.Event()

    def send(stage: str) -> None:
        sent.append(stage)
        if sent.count("generate") >= 3:
            twice.set()

    with Heartbeat(send, every=0.05) as beat:
        beat("generate")
        assert twice.wait(5)
    closed = len(sent)
    threading.Event().wait(0.2)
    assert sent[0] == "generate" and set(sent) == {"generate"} and len(sent) == closed


def test_heartbeat_survives_a_failed_send() -> None:
    from core.jobs import Heartbeat

    def send(stage: str) -> None:
        raise ConnectionError("broker gone")

    with Heartbeat(send, every=10) as beat:
        beat("generate")  # logged, not raised
