"""``/v1/models`` and ``/v1/chat/completions`` through Django's test client: shapes, scope, follow-ups,
streaming, the audit row and every error code. The live server with the real ``openai`` SDK is in
test_openai_live.py."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from foundry_site.openai_api import chat as chat_module
from foundry_site.openai_api.chat import chat_request_parse
from foundry_site.openai_api.present import sentences_split
from core.ratelimit import rate_limit_check
from foundry_site.services.tokens import token_create
from generation.models import QueryLog
from sources.models import Chunk
from sources.viewer import viewer_url
from tests.conftest import ScriptedLLM
from tests.generation.conftest import echo_reply, follows_seen, scoped, world_users  # noqa: F401 (fixtures)

pytestmark = pytest.mark.django_db

QUESTION = "How many sensors can be connected to the RS-485 bus?"


def api(username: str) -> Client:
    return Client(enforce_csrf_checks=True, HTTP_AUTHORIZATION=f"Bearer {token_create(username=username).plain}")


def chat(client: Client, *messages: str, **body: Any) -> Any:
    turns = [{"role": "user" if i % 2 == 0 else "assistant", "content": m} for i, m in enumerate(messages)]
    return client.post(
        "/v1/chat/completions",
        json.dumps({"model": "foundry", "messages": turns, **body}),
        content_type="application/json",
    )


def events(response: Any) -> list[Any]:
    text = b"".join(response.streaming_content).decode()
    assert text.endswith("data: [DONE]\n\n"), text[-300:]
    return [json.loads(line[6:]) for line in text.split("\n") if line.startswith("data: {")]


def test_models_are_foundry_and_each_readable_collection(scoped: dict) -> None:
    assert [m["id"] for m in api("alice").get("/v1/models").json()["data"]] == ["foundry", "foundry/alpha"]
    assert [m["id"] for m in api("root").get("/v1/models").json()["data"]] == [
        "foundry",
        "foundry/alpha",
        "foundry/beta",
    ]
    assert api("alice").get("/v1/models/foundry/alpha").json()["id"] == "foundry/alpha"
    for model in ("foundry/beta", "foundry/nope", "gpt-4o"):  # another user's collection looks like no model
        response = api("alice").get(f"/v1/models/{model}")
        assert response.status_code == 404 and response.json()["error"]["code"] == "model_not_found"


def test_answer_has_numbered_citations_sources_and_foundry_data(scoped: dict, scripted_llm: ScriptedLLM) -> None:
    response = chat(api("alice"), QUESTION)
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["object"] == "chat.completion" and body["model"] == "foundry"
    content = body["choices"][0]["message"]["content"]
    assert "[1]" in content and "[S1]" not in content and "\n\nSources:\n[1] alpha-notes.md" in content
    foundry = body["foundry"]
    assert foundry["answer_class"] in ("normal", "low_confidence") and foundry["refusal"] is None
    cited = foundry["citations"][0]
    assert cited["id"] == 1 and cited["source"] == "alpha-notes.md"
    assert cited["url"].startswith("http://testserver/api/v1/sources/")
    assert api("alice").get(cited["url"]).json()["id"] == cited["chunk_id"]  # the URL opens the chunk
    # ... and viewer_url the web viewer at its quoted lines, the link the ask page gives the same citation.
    source_id = Chunk.objects.get(pk=cited["chunk_id"]).source_id
    assert cited["viewer_url"] == "http://testserver" + viewer_url(source_id, cited["chunk_id"], cited["lines"])
    assert body["usage"]["total_tokens"] == body["usage"]["prompt_tokens"] + body["usage"]["completion_tokens"]
    row = QueryLog.objects.get(pk=foundry["query_id"])
    assert row.user == scoped["alice"] and row.question == QUESTION and row.message == ""
    bob = chat(api("bob"), QUESTION).json()
    assert {c["source"] for c in bob["foundry"]["citations"]} == {"beta-notes.md"}
    again = chat(api("carol"), QUESTION).json()  # same scope as alice: served from the answer cache
    assert again["foundry"]["cached"] and again["choices"][0]["message"]["content"] == content


def test_one_collection_model_searches_only_it(scoped: dict, scripted_llm: ScriptedLLM) -> None:
    body = chat(api("root"), QUESTION, model="foundry/beta").json()
    assert {c["source"] for c in body["foundry"]["citations"]} == {"beta-notes.md"}
    assert chat(api("alice"), QUESTION, model="foundry/beta").status_code == 404
    assert QueryLog.objects.count() == 1


def test_stream_sends_sentences_then_sources_then_done(scoped: dict, scripted_llm: ScriptedLLM) -> None:
    plain = chat(api("alice"), QUESTION).json()
    response = chat(api("carol"), QUESTION, stream=True, stream_options={"include_usage": True})
    assert response.status_code == 200 and response["Content-Type"] == "text/event-stream"
    chunks = events(response)
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    assert text == plain["choices"][0]["message"]["content"]
    final = [c for c in chunks if c["choices"] and c["choices"][0]["finish_reason"] == "stop"]
    assert len(final) == 1 and final[0]["foundry"]["citations"][0]["source"] == "alpha-notes.md"
    assert chunks[-1]["choices"] == [] and "total_tokens" in chunks[-1]["usage"]


def test_refusal_is_a_normal_assistant_message(scoped: dict, scripted_llm: ScriptedLLM) -> None:
    body = chat(api("alice"), "Who won the 1998 football world cup?").json()
    assert body["choices"][0]["finish_reason"] == "stop"
    assert body["foundry"]["answer_class"] == "no_evidence" and body["foundry"]["refusal"] == "gate"
    assert body["foundry"]["citations"] == [] and "Sources:" not in body["choices"][0]["message"]["content"]
    assert scripted_llm.calls == []


def test_follow_up_is_condensed_and_both_are_logged(scoped: dict, scripted_llm: ScriptedLLM) -> None:
    body = chat(api("alice"), "How must the RS-485 bus be terminated?", "At both ends.", "And how many sensors?")
    assert body.status_code == 200, body.content
    row = QueryLog.objects.get(pk=body.json()["foundry"]["query_id"])
    assert row.message == "And how many sensors?"
    assert row.question.startswith("And how many sensors? (") and "RS-485" in row.question
    assert body.json()["foundry"]["question"] == row.question


def test_a_follow_up_is_read_with_the_assistant_answer_after_the_turn_it_follows(
    scoped: dict, scripted_llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    follows = follows_seen(monkeypatch, chat_module)
    earlier = "Terminate both ends with 120 Ω. [1]\n\nSources:\n[1] alpha-notes.md"
    body = chat(api("alice"), "How must the RS-485 bus be terminated?", earlier, "And how many sensors?")
    assert body.status_code == 200, body.content
    assert follows == [("Terminate both ends with 120 Ω.",)]  # the client's copy: the API keeps no state


def test_each_earlier_question_is_paired_with_the_assistant_answer_after_it() -> None:
    body = {
        "model": "foundry",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "How must the RS-485 bus be terminated?"},
            {"role": "assistant", "content": "With 120 Ω at both ends. [1]"},
            {"role": "user", "content": "Thanks."},
            {"role": "user", "content": "And how long may it be?"},
        ],
    }
    request = chat_request_parse(json.dumps(body).encode())
    assert request.history == ["How must the RS-485 bus be terminated?", "Thanks."]
    assert request.replies == ["With 120 Ω at both ends. [1]", ""]


def test_errors_have_openai_shape_and_status(scoped: dict, settings: Any) -> None:
    cases = [
        (Client().get("/v1/models"), 401, "invalid_api_key"),
        (
            Client(HTTP_AUTHORIZATION="Bearer fdy_forged").post(
                "/v1/chat/completions", "{}", content_type="application/json"
            ),
            401,
            None,
        ),
        (chat(api("alice"), QUESTION, model="gpt-4o"), 404, "model_not_found"),
        (api("alice").post("/v1/chat/completions", "not json", content_type="application/json"), 400, None),
        (chat(api("alice"), QUESTION, model=""), 400, None),
        (chat(api("alice"), QUESTION, stream="yes"), 400, None),
        (chat(api("alice"), QUESTION, n=2), 400, None),
        (chat(api("alice"), QUESTION, "ok"), 400, None),  # last message is the assistant's
        (chat(api("alice"), "   "), 400, None),
        (chat(api("alice"), "x" * 5000), 400, None),
        (api("alice").get("/v1/chat/completions"), 405, "method_not_allowed"),
        (chat(api("dave"), QUESTION), 403, "no_collections"),
        (api("alice").get("/v1/embeddings"), 404, "unknown_url"),
        (api("alice").post("/v1/nothing/else", "{}", content_type="application/json"), 404, "unknown_url"),
        (api("alice").get("/v1/"), 404, "unknown_url"),
        (api("alice").get("/v1/models/\n"), 404, "unknown_url"),
        (Client().get("/v1/nothing"), 401, "invalid_api_key"),
    ]
    params = {3: None, 4: "model", 5: "stream", 6: "n", 7: "messages[1].role", 8: "messages[0]", 9: "messages"}
    for i, (response, status, code) in enumerate(cases):
        assert response.status_code == status, (i, response.content)
        error = response.json()["error"]
        assert set(error) == {"message", "type", "param", "code"} and error["message"], i
        assert code is None or error["code"] == code, (i, error)
        assert i not in params or error["param"] == params[i], (i, error)
    assert cases[0][0]["WWW-Authenticate"].startswith("Bearer")
    assert cases[0][0].json()["error"]["message"].startswith("Authentication required: send Authorization: Bearer")
    assert cases[1][0].json()["error"]["message"].startswith("The bearer token sent is unknown")
    assert "Invalid URL (POST /v1/nothing/else)" in cases[13][0].json()["error"]["message"]
    assert cases[10][0]["Allow"] == "POST"
    content = api("alice").post(
        "/v1/chat/completions",
        json.dumps(
            {"model": "foundry", "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]}
        ),
        content_type="application/json",
    )
    assert content.status_code == 400 and content.json()["error"]["param"] == "messages[0].content"
    assert QueryLog.objects.count() == 0


def test_rate_limit_is_429_with_retry_after(scoped: dict, settings: Any) -> None:
    settings.FOUNDRY_QUERY_RATE = 1
    rate_limit_check(scoped["alice"].pk)
    response = chat(api("alice"), QUESTION)
    assert response.status_code == 429 and int(response["Retry-After"]) >= 1
    assert response.json()["error"]["code"] == "rate_limit_exceeded"
    assert chat(api("alice"), QUESTION, stream=True).status_code == 429  # before any event is sent
    assert QueryLog.objects.count() == 0


def test_a_low_confidence_answer_says_so_before_its_sources(
    scoped: dict, scripted_llm: ScriptedLLM, foundry_config
) -> None:
    confident = chat(api("alice"), QUESTION).json()
    foundry_config(generation={"low_confidence_score": 1.0})  # no passage is that close: every answer is weak
    weak = chat(api("alice"), QUESTION).json()
    assert confident["foundry"]["answer_class"] == "normal" and weak["foundry"]["answer_class"] == "low_confidence"
    assert "Low confidence" not in confident["choices"][0]["message"]["content"]
    assert (
        "\n\nLow confidence: the sources match the question only loosely.\n\nSources:\n[1] "
        in weak["choices"][0]["message"]["content"]
    )
    streamed = "".join(
        e["choices"][0]["delta"].get("content", "")
        for e in events(chat(api("alice"), QUESTION, stream=True))
        if e["choices"]
    )
    assert streamed == weak["choices"][0]["message"]["content"]


def test_sentences_split_joins_back_to_the_text() -> None:
    text = "Up to 8 sensors. [1] The bus needs 120 Ohm. [1][2]\nVCC is 3.3 V. [2]"
    assert sentences_split(text) == ["Up to 8 sensors. [1] ", "The bus needs 120 Ohm. [1][2]\n", "VCC is 3.3 V. [2]"]
    assert sentences_split("No source holds this. Ask again.") == ["No source holds this. ", "Ask again."]


def test_an_llm_condenser_rewrites_the_follow_up(scoped: dict, scripted_llm: ScriptedLLM, foundry_config: Any) -> None:
    foundry_config(retrieval={"condense_model": "scripted/condenser"})

    def reply(messages: list[dict[str, str]]) -> str:
        if messages[-1]["content"].startswith("Rewrite the user's last message"):
            return "How must the RS-485 sensor bus be terminated?"
        return echo_reply(messages)

    scripted_llm.reply = reply
    body = chat(api("alice"), "How many sensors can the RS-485 bus take?", "8 sensors [1]", "And its termination?")
    assert body.status_code == 200, body.content
    row = QueryLog.objects.get(pk=body.json()["foundry"]["query_id"])
    assert row.message == "And its termination?" and row.question == "How must the RS-485 sensor bus be terminated?"


def test_a_failing_condenser_is_503_in_openai_shape(
    scoped: dict, scripted_llm: ScriptedLLM, foundry_config: Any
) -> None:
    foundry_config(retrieval={"condense_model": "scripted/condenser"}, llm={"retries": 0})

    def broken(messages: list[dict[str, str]]) -> str:
        raise RuntimeError("model down")

    scripted_llm.reply = broken
    response = chat(api("alice"), QUESTION, "8 sensors [1]", "And its termination?")
    assert response.status_code in (502, 503) and response.json()["error"]["type"] == "server_error"
    streamed = chat(api("alice"), QUESTION, "8 sensors [1]", "And its termination?", stream=True)
    text = b"".join(streamed.streaming_content).decode()
    assert streamed.status_code == 200 and '"error": {' in text and "[DONE]" not in text
