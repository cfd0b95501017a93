"""The OpenAI-compatible API end to end, with the real ``openai`` SDK against a live ``foundry serve``
(gunicorn, its own FOUNDRY_HOME, real MiniLM embeddings and the shipped extractive reader).

alice reads ``docs`` (knowledge_base/); bob reads only ``secret``. The SDK gets a plain and a streamed
answer with citations, a three-turn conversation whose third question leans on the first, a refusal,
and every error code (401, 404, 400, 429 with Retry-After).
"""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import openai
import pytest
from django.conf import settings

from tests.foundry_site.test_mcp_live import SECRET_DOC, SETUP
from tests.reliability.test_load import foundry_argv, free_port, ingest_env, server_env, wait_until_up

pytestmark = pytest.mark.integration

RATE = 12  # FOUNDRY_QUERY_RATE of the live server
QUESTION = "How many sensors can be connected to the RS-485 bus?"
SOURCES = ("ax200-user-manual.md", "ax200-specs.json", "ax200-datasheet.pdf", "release-notes.txt")


@dataclass
class Live:
    url: str
    home: Path
    tokens: dict[str, str]

    def client(self, who: str, **options: object) -> openai.OpenAI:
        # No retries: the SDK would otherwise wait out a 429's Retry-After and try again.
        return openai.OpenAI(base_url=f"{self.url}/v1", api_key=self.tokens.get(who, who), max_retries=0,
                             timeout=600, **options)

    def log_row(self, query_id: int) -> dict[str, object]:
        with sqlite3.connect(f"file:{self.home / 'foundry.sqlite3'}?mode=ro", uri=True, timeout=60) as db:
            db.row_factory = sqlite3.Row
            return dict(db.execute("SELECT * FROM retrieval_querylog WHERE id = ?", [query_id]).fetchone())


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    home = tmp_path_factory.mktemp("openai-home")
    (home / "secret").mkdir()
    (home / "secret" / "kestrel.md").write_text(SECRET_DOC)
    env = ingest_env({**server_env(home), "FOUNDRY_QUERY_RATE": str(RATE)}, home)  # no source summaries
    done = subprocess.run([sys.executable, "-c", SETUP, str(settings.BASE_DIR / "knowledge_base"),
                           str(home / "secret")],
                          env=env, cwd=settings.BASE_DIR, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    tokens = json.loads(done.stdout.strip().splitlines()[-1])
    port = free_port()
    with (home / "serve.log").open("w") as out:
        proc = subprocess.Popen(foundry_argv("serve", "--port", str(port), "--workers", "1"), env=env,
                                cwd=settings.BASE_DIR, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until_up(url, proc)
        yield Live(url, home, tokens)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
    log = (home / "serve.log").read_text()
    assert "Traceback" not in log, log[-3000:]


def ask(client: openai.OpenAI, *turns: str, model: str = "foundry") -> openai.types.chat.ChatCompletion:
    messages = [{"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(turns)]
    return client.chat.completions.create(model=model, messages=messages)


def test_models_list_the_callers_collections(live: Live) -> None:
    assert [m.id for m in live.client("alice").models.list()] == ["foundry", "foundry/docs"]
    assert [m.id for m in live.client("bob").models.list()] == ["foundry", "foundry/secret"]
    assert live.client("alice").models.retrieve("foundry/docs").id == "foundry/docs"


def test_plain_and_streamed_answers_carry_citations(live: Live) -> None:
    client = live.client("alice")
    plain = ask(client, QUESTION, model="foundry/docs")
    content = plain.choices[0].message.content
    foundry = plain.model_extra["foundry"]
    assert "[1]" in content and "\nSources:\n[1] " in content and "8 sensors" in content
    assert foundry["answer_class"] in ("normal", "low_confidence") and foundry["query_id"] > 0
    assert foundry["citations"] and all(c["source"] in SOURCES for c in foundry["citations"])
    assert plain.usage.total_tokens == 0  # the extractive reader calls no LLM
    chunks = list(client.chat.completions.create(model="foundry/docs", stream=True,
                                                 stream_options={"include_usage": True},
                                                 messages=[{"role": "user", "content": QUESTION}]))
    pieces = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    assert "".join(pieces) == content and len(pieces) >= 2  # at least one sentence, then the Sources list
    final = [c for c in chunks if c.choices and c.choices[0].finish_reason == "stop"]
    assert len(final) == 1 and final[0].model_extra["foundry"]["citations"] == foundry["citations"]
    assert chunks[-1].usage is not None and chunks[-1].choices == []


def test_three_turn_conversation_third_question_needs_the_first(live: Live) -> None:
    client = live.client("carol")
    first = "What is the operating temperature range of the AX-200?"
    second = "How many sensors can be connected to the RS-485 bus?"
    answers = [ask(client, first)]
    answers.append(ask(client, first, answers[0].choices[0].message.content, second))
    third = ask(client, first, answers[0].choices[0].message.content, second,
                answers[1].choices[0].message.content, "And the storage temperature?")
    foundry = third.model_extra["foundry"]
    assert foundry["message"] == "And the storage temperature?"
    assert "AX-200" in foundry["question"] and "RS-485" not in foundry["question"]
    assert "-40" in third.choices[0].message.content and foundry["citations"]
    row = live.log_row(foundry["query_id"])  # the audit keeps both the words typed and the question answered
    assert row["message"] == "And the storage temperature?" and row["question"] == foundry["question"]


def test_refusal_is_a_normal_assistant_message(live: Live) -> None:
    refused = ask(live.client("alice"), "Who won the 1998 football world cup?")
    assert refused.choices[0].finish_reason == "stop" and refused.choices[0].message.content
    assert refused.model_extra["foundry"]["answer_class"] == "no_evidence"
    assert refused.model_extra["foundry"]["refusal"] == "gate" and refused.model_extra["foundry"]["citations"] == []


def test_every_error_code(live: Live) -> None:
    with pytest.raises(openai.AuthenticationError) as unauthenticated:
        live.client("fdy_not-a-token").models.list()
    assert unauthenticated.value.status_code == 401 and unauthenticated.value.code == "invalid_api_key"
    for model in ("gpt-4o", "foundry/docs"):  # bob cannot read docs: the same 404 as a model that does not exist
        with pytest.raises(openai.NotFoundError) as unknown:
            ask(live.client("bob"), QUESTION, model=model)
        assert unknown.value.code == "model_not_found"
    with pytest.raises(openai.BadRequestError) as bad:
        live.client("rita").chat.completions.create(model="foundry", messages=[{"role": "assistant", "content": "x"}])
    assert bad.value.param == "messages[0].role"
    rita = live.client("rita")
    with pytest.raises(openai.RateLimitError) as limited:
        for _ in range(RATE + 1):
            ask(rita, QUESTION)
    assert limited.value.code == "rate_limit_exceeded"
    assert int(limited.value.response.headers["retry-after"]) >= 1
