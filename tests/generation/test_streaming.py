"""Answers streamed sentence by sentence: each sent only once verified, together equal to the logged answer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from foundry_site.services.tokens import token_create
from generation.answers import answer_pieces, answer_question
from generation.streaming import run_streamed
from generation.models import QueryLog
from tests.conftest import ScriptedLLM

pytestmark = pytest.mark.django_db

QUESTION = "How many sensors can the RS-485 bus take, and how is it terminated?"
SUPPORTED_1 = "Up to 8 sensors can be connected to the RS-485 bus. [S1]"
INVENTED = "The bus also powers a coffee machine on the moon at 900 W. [S1]"
SUPPORTED_2 = "The bus must be terminated with 120 Ohm at both ends. [S1]"


def label_of(messages: list[dict[str, str]], needle: str) -> str:
    context = messages[0]["content"]
    head = context[: context.index(needle)].rsplit("[S", 1)[1]
    return "S" + head.split("]", 1)[0]


def three_sentences(messages: list[dict[str, str]]) -> str:
    label = label_of(messages, "RS-485 bus")
    return " ".join(s.replace("[S1]", f"[{label}]") for s in (SUPPORTED_1, INVENTED, SUPPORTED_2))


def test_answer_pieces_join_back_to_the_text() -> None:
    text = "One [S1] two [S2][S3] three. [S2]\nFour [S1]"
    assert "".join(answer_pieces(text)) == text and len(answer_pieces(text)) == 4


def test_a_model_answer_streams_verified_sentences_while_it_is_written(
    indexed: Path, scripted_llm: ScriptedLLM, foundry_config: Any
) -> None:
    foundry_config(generation={"cache_answers": False})
    scripted_llm.reply = three_sentences
    sent: list[tuple[str, int]] = []  # (piece, words the model had written when it was sent)
    streamed = answer_question(
        question=QUESTION, on_sentence=lambda text: sent.append((text, len(scripted_llm.stream_pieces)))
    )
    words = len(scripted_llm.stream_pieces)
    assert "".join(text for text, _ in sent) == streamed.answer and "8 sensors" in streamed.answer
    assert "coffee" not in streamed.answer and all("coffee" not in text for text, _ in sent)
    assert sent[0][1] < words  # the first sentence went out before the model had finished
    assert all("[S" in text for text, _ in sent)
    plain = answer_question(question=QUESTION)  # the same question, not streamed
    assert (plain.answer, plain.citations, plain.coverage, plain.answer_class) == (
        streamed.answer,
        streamed.citations,
        streamed.coverage,
        streamed.answer_class,
    )
    rows = {r.run_id: r for r in QueryLog.objects.all()}
    assert rows[plain.run_id].answer == rows[streamed.run_id].answer
    assert rows[plain.run_id].grounding["sentences"] == rows[streamed.run_id].grounding["sentences"]


def test_an_unsupported_reply_streams_nothing(indexed: Path, scripted_llm: ScriptedLLM) -> None:
    scripted_llm.reply = lambda messages: "The bus powers a coffee machine on the moon. [S1] It is pink. [S1]"
    sent: list[str] = []
    answer = answer_question(question=QUESTION, on_sentence=sent.append)
    assert sent == [] and answer.refusal == "grounding"


def test_the_extractive_reader_streams_its_quotes(indexed: Path, foundry_config: Any) -> None:
    foundry_config(generation={"model": "extractive", "cache_answers": True})
    sent: list[str] = []
    answer = answer_question(question=QUESTION, on_sentence=sent.append)
    assert sent and "".join(sent) == answer.answer and answer.citations
    cached: list[str] = []
    again = answer_question(question=QUESTION, on_sentence=cached.append)
    assert again.cached and "".join(cached) == again.answer == answer.answer


def test_a_refusal_streams_nothing(indexed: Path, scripted_llm: ScriptedLLM) -> None:
    sent: list[str] = []
    answer = answer_question(question="Who won the 1998 football world cup?", on_sentence=sent.append)
    assert sent == [] and answer.refusal == "gate" and scripted_llm.calls == []


def test_the_openai_stream_equals_the_plain_answer_for_a_model(
    indexed: Path, scripted_llm: ScriptedLLM, foundry_config: Any, make_user: Any
) -> None:
    foundry_config(generation={"cache_answers": False})
    scripted_llm.reply = three_sentences
    make_user("root", superuser=True)
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token_create(username='root').plain}")
    body = {"model": "foundry", "messages": [{"role": "user", "content": QUESTION}]}
    plain = client.post("/v1/chat/completions", json.dumps(body), content_type="application/json").json()
    response = client.post(
        "/v1/chat/completions", json.dumps({**body, "stream": True}), content_type="application/json"
    )
    chunks = [
        json.loads(line[6:])
        for line in b"".join(response.streaming_content).decode().split("\n")
        if line.startswith("data: {")
    ]
    pieces = [c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"]]
    assert "".join(pieces) == plain["choices"][0]["message"]["content"] and "coffee" not in "".join(pieces)
    assert len([p for p in pieces if "[1]" in p and "Sources:" not in p]) == 2  # one chunk per verified sentence


def test_run_streamed_hands_over_events_then_the_result_or_the_error() -> None:
    def work(emit: Any) -> str:
        emit("stage", "one")
        emit("sentence", "Two.")
        return "done"

    assert [(e.kind, e.value) for e in run_streamed(work)] == [("stage", "one"), ("sentence", "Two."), ("done", "done")]

    def broken(emit: Any) -> None:
        raise ValueError("no")

    events = list(run_streamed(broken))
    assert [e.kind for e in events] == ["error"] and str(events[0].value) == "no"


def test_run_streamed_finishes_the_work_when_the_client_leaves() -> None:
    finished: list[bool] = []

    def work(emit: Any) -> None:
        emit("sentence", "First.")
        emit("sentence", "Second.")
        finished.append(True)

    stream = run_streamed(work)
    assert next(stream).value == "First."
    stream.close()  # the client went away after the first sentence
    assert finished == [True]


@pytest.mark.integration
def test_the_local_model_streams_the_same_reply_and_tokens(settings: Any) -> None:
    from core import llm

    messages = [
        {"role": "system", "content": "You answer briefly."},
        {"role": "user", "content": "Name two colours of the sky, one sentence each."},
    ]
    for max_tokens in (5, 60):  # cut at the limit, and finished
        plain = llm.complete(messages=messages, purpose="test", model="local/smollm2-135m", max_tokens=max_tokens)
        grown: list[str] = []
        streamed = llm.complete(
            messages=messages, purpose="test", model="local/smollm2-135m", max_tokens=max_tokens, on_text=grown.append
        )
        assert (streamed.text, streamed.prompt_tokens, streamed.completion_tokens) == (
            plain.text,
            plain.prompt_tokens,
            plain.completion_tokens,
        )
        assert (
            len(grown) > 1
            and grown[-1].strip() == plain.text
            and all(b.startswith(a) for a, b in zip(grown, grown[1:]))
        )


@pytest.mark.integration
def test_a_local_model_answer_streamed_equals_the_plain_one(indexed: Path, foundry_config: Any) -> None:
    foundry_config(generation={"model": "local/smollm2-135m", "cache_answers": False})
    sent: list[str] = []
    streamed = answer_question(question=QUESTION, on_sentence=sent.append)
    plain = answer_question(question=QUESTION)
    assert "".join(sent) == (streamed.answer if streamed.citations else "")
    assert (plain.answer, plain.citations, plain.coverage, plain.tokens) == (
        streamed.answer,
        streamed.citations,
        streamed.coverage,
        streamed.tokens,
    )
