"""An answer's refusal and low-confidence texts speak the question's language; the interface speaks the reader's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from django.utils import translation

from foundry_site.services.tokens import token_create
from generation.answers.language import question_language
from generation.models import QueryLog
from tests.conftest import ScriptedLLM, login

pytestmark = pytest.mark.django_db

QUESTIONS = json.loads((Path(__file__).parent / "data" / "questions_language.json").read_text(encoding="utf-8"))
OFF_TOPIC = {
    "en": "Who won the football world cup in 1954?",
    "nl": "Wie heeft in 1954 het wereldkampioenschap voetbal gewonnen?",
    "de": "Wer hat im Jahr 1954 die Fußballweltmeisterschaft gewonnen?",
}
NO_EVIDENCE = {
    "en": "No supporting documentation found in indexed sources.",
    "nl": "Geen passend antwoord gevonden in de geïndexeerde documenten.",
    "de": "Keine passende Antwort in den hochgeladenen Dokumenten gefunden.",
}
BADGE = {"en": "No evidence in your sources", "nl": "Geen bewijs in je bronnen", "de": "Keine Belege in Ihren Quellen"}
LOW = {
    "en": "Low confidence: the sources match the question only loosely.",
    "nl": "Lage zekerheid: de bronnen passen maar losjes bij de vraag.",
    "de": "Geringe Sicherheit: Die Quellen passen nur lose zur Frage.",
}


@pytest.mark.parametrize("code", ["nl", "de"])
def test_dutch_and_german_questions_are_told_apart(code: str) -> None:
    assert {question_language(q) for q in QUESTIONS[code]} == {code}


def test_a_question_too_short_to_tell_keeps_the_interface_language() -> None:
    assert question_language("How many sensors can be connected to the RS-485 bus?") == "en"
    for short in ("sensors", "pump relief valve", "Q?"):
        assert question_language(short) == "en"
        with translation.override("nl"):
            assert question_language(short) == "nl"
    with translation.override("de"):  # a clear English question stays English on a German page
        assert question_language("Which cable does the bus need?") == "en"


def api(username: str) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Bearer {token_create(username=username, name='test').plain}")


@pytest.mark.parametrize("code", ["en", "nl", "de"])
def test_the_api_refuses_in_the_questions_language(scoped: dict, scripted_llm: ScriptedLLM, code: str) -> None:
    body = json.dumps({"question": OFF_TOPIC[code]})
    answer = api("alice").post("/api/v1/query", body, content_type="application/json").json()
    assert answer["answer"] == NO_EVIDENCE[code]
    assert (answer["answer_class"], answer["refusal"]) == ("no_evidence", "gate")  # the codes never change
    assert ("foundry ingest" in answer["hint"]) and (answer["hint"].startswith("Nothing relevant") == (code == "en"))
    assert QueryLog.objects.get(pk=answer["query_id"]).answer == NO_EVIDENCE[code]  # the log keeps what was shown
    assert scripted_llm.calls == []


@pytest.mark.parametrize("code", ["en", "nl", "de"])
def test_the_chat_api_refuses_in_the_questions_language(scoped: dict, code: str) -> None:
    body = {"model": "foundry", "messages": [{"role": "user", "content": OFF_TOPIC[code]}]}
    reply = api("alice").post("/v1/chat/completions", json.dumps(body), content_type="application/json").json()
    assert reply["choices"][0]["message"]["content"].startswith(NO_EVIDENCE[code])
    assert reply["foundry"]["answer_class"] == "no_evidence"


@pytest.mark.parametrize("code", ["en", "nl", "de"])
def test_the_chat_apis_low_confidence_note_speaks_the_questions_language(
    scoped: dict, foundry_config: Any, code: str
) -> None:
    # Every passage passes the gate and every answer counts as weak: the note is what is checked here.
    foundry_config(retrieval={"min_chunks": 1, "min_score": 0.0}, generation={"low_confidence_score": 0.99})
    question = {
        "en": "How many sensors can be connected to the bus?",
        "nl": QUESTIONS["nl"][0],
        "de": QUESTIONS["de"][0],
    }[code]
    body = {"model": "foundry", "messages": [{"role": "user", "content": question}]}
    reply = api("alice").post("/v1/chat/completions", json.dumps(body), content_type="application/json").json()
    assert reply["foundry"]["answer_class"] == "low_confidence", reply
    content = reply["choices"][0]["message"]["content"]
    assert LOW[code] in content and all(LOW[other] not in content for other in LOW if other != code)


@pytest.mark.parametrize("interface", ["en", "nl", "de"])
@pytest.mark.parametrize("code", ["en", "nl", "de"])
def test_the_ask_page_refuses_in_the_questions_language(scoped: dict, interface: str, code: str) -> None:
    client = login(scoped["alice"])
    client.cookies["django_language"] = interface
    response = client.post("/ask/", {"question": OFF_TOPIC[code]})
    page = client.get(response["Location"]).content.decode()
    assert BADGE[code] in page and all(BADGE[other] not in page for other in BADGE if other != code)
    audit = {"en": "Audit record", "nl": "Auditregistratie", "de": "Prüfprotokoll"}[interface]  # the page's own
    assert audit in page and f'<html lang="{interface}">' in page
    row = QueryLog.objects.get()
    assert (row.answer, row.answer_class, row.refusal) == (NO_EVIDENCE[code], "no_evidence", "gate")


def test_the_interface_follows_accept_language(client: Client, make_user: Any) -> None:
    client.force_login(make_user("erin"))
    assert "Ask your documents" in client.get("/ask/").content.decode()
    page = client.get("/ask/", HTTP_ACCEPT_LANGUAGE="de-DE,de;q=0.9,en;q=0.5").content.decode()
    assert '<html lang="de">' in page and "Fragen Sie Ihre Dokumente" in page and "Abmelden" in page
    assert "Vraag het je documenten" in client.get("/ask/", HTTP_ACCEPT_LANGUAGE="nl").content.decode()


def test_the_selector_keeps_the_chosen_language_over_the_browsers(make_user: Any) -> None:
    client = Client(enforce_csrf_checks=False)
    client.force_login(make_user("erin"))
    response = client.post("/i18n/setlang/", {"language": "nl", "next": "/ask/"}, HTTP_ACCEPT_LANGUAGE="de")
    assert response.status_code == 302 and response["Location"] == "/ask/"
    assert client.cookies["django_language"].value == "nl"
    page = client.get("/ask/", HTTP_ACCEPT_LANGUAGE="de").content.decode()
    assert '<html lang="nl">' in page and "Vraag het je documenten" in page
    assert 'value="nl" lang="nl" title="Nederlands" aria-current="true"' in page  # the selector marks it


def test_the_login_page_can_be_switched_before_signing_in() -> None:
    client = Client()
    response = client.post("/i18n/setlang/", {"language": "de", "next": "/accounts/login/"})
    assert response.status_code == 302 and response["Location"] == "/accounts/login/"
    page = client.get("/accounts/login/").content.decode()
    assert "Benutzername" in page and "Passwort" in page
