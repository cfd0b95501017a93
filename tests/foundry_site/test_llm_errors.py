"""How core.llm classifies model failures (no network, no model weights)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest

from core import llm
from core.llm import local, retry


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
        raise retry.litellm.APIConnectionError(message="connection refused", llm_provider="openai", model="m")

    with pytest.raises(llm.LLMError) as caught:
        retry._with_retries(refused, model="m", retries=2, what="generate")
    assert caught.value.transient is True and slept == [1.0, 2.0]


@pytest.mark.integration
def test_local_model_generates_without_crashing_the_process(tmp_path: Any) -> None:
    """Regression: on this AMX CPU a natively built llama.cpp died with SIGSEGV in ggml_backend_amx_mul_mat
    on the first decode of a few tokens (every real generation, and the compute worker running it); the
    Makefile builds it without AMX. A subprocess, so that a crash fails this test
    instead of killing the test run."""
    import os
    import subprocess
    import sys

    from django.conf import settings

    code = (
        "import django; django.setup(); from core import llm; "
        "r = llm.complete(messages=[{'role': 'user', 'content': 'Write two sentences about firmware updates.'}], "
        "purpose='test', model='local/smollm2-135m', max_tokens=40); "
        "print('completion_tokens', r.completion_tokens)"
    )
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "foundry_site.settings",
        "FOUNDRY_HOME": str(tmp_path),
        "PYTHONPATH": str(settings.BASE_DIR),
    }
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=settings.BASE_DIR, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, f"exit {done.returncode}:\n{done.stderr[-2000:]}"
    assert int(done.stdout.split("completion_tokens")[1]) > 5


def test_texts_are_embedded_shortest_first_and_returned_in_input_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches of similar length are padded little: a chunk's 20-token windows do not wait for its 200 tokens."""
    import math
    from types import SimpleNamespace

    sent: list[list[str]] = []

    def encode(texts: list[str], batch_size: int) -> np.ndarray:  # a local embedder batches the texts it is given
        sent.extend(list(texts[i : i + batch_size]) for i in range(0, len(texts), batch_size))
        return np.array([[math.cos(len(t) / 100), math.sin(len(t) / 100)] for t in texts])

    monkeypatch.setattr(local._local, "embedders", {"all-minilm-l6-v2": SimpleNamespace(encode=encode)})
    texts = ["a chunk of some length", "w1", "another, longer chunk of text here", "win"]
    vectors = llm.embed(texts, model="local/all-minilm-l6-v2", batch_size=2)
    assert sent == [["w1", "win"], ["a chunk of some length", "another, longer chunk of text here"]]
    assert [round(v[1], 6) for v in vectors] == [round(math.sin(len(t) / 100), 6) for t in texts]
