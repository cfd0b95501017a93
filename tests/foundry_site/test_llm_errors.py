"""How foundry_site.llm classifies model failures (no network, no model weights)."""
from __future__ import annotations

import time

import pytest

from foundry_site import llm


def test_unknown_local_model_fails_at_once_as_permanent(monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression: litellm wraps ModelUnavailable from the local provider in APIConnectionError,
    which was retried with backoff (7 s) and then reported as transient (so a broker retried it again)."""
    slept: list[float] = []
    monkeypatch.setattr(time, "sleep", slept.append)
    with pytest.raises(llm.ModelUnavailable) as caught:
        llm.complete(messages=[{"role": "user", "content": "hi"}], purpose="generate", model="local/no-such-model")
    assert caught.value.transient is False and slept == []
    assert "unknown local chat model 'no-such-model'" in str(caught.value)


def test_connection_errors_are_still_retried_as_transient(monkeypatch: pytest.MonkeyPatch) -> None:
    slept: list[float] = []
    monkeypatch.setattr(time, "sleep", slept.append)

    def refused() -> None:
        raise llm.litellm.APIConnectionError(message="connection refused", llm_provider="openai", model="m")

    with pytest.raises(llm.LLMError) as caught:
        llm._with_retries(refused, model="m", retries=2, what="generate")
    assert caught.value.transient is True and slept == [1.0, 2.0]
