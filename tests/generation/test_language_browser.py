"""The interface switched to Dutch, then German, on the ask page in a real browser (chromium); an answer's
refusal speaks the question's language, its badge too, whatever the interface's.

Same site as tests/generation/test_web_browser.py: the scripted generator, real retrieval and pages.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from generation.models import QueryLog
from tests.generation.test_web_browser import shot, sign_in, site  # noqa: F401 (``site`` is a fixture)

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 390, "height": 844}


def ask(page: Any, question: str) -> QueryLog:
    from playwright.sync_api import expect

    before = QueryLog.objects.count()
    page.fill("#id_question", question)
    page.click("#ask-form button[type=submit]")
    expect(page.locator("#answer")).to_be_visible()
    expect(page.locator("#answer .question")).to_contain_text(question)
    assert QueryLog.objects.count() == before + 1
    return QueryLog.objects.order_by("-pk").first()  # type: ignore[return-value]


def test_switch_the_ask_page_to_dutch_then_german(browser_page: Any, live_server: Any, site: Any) -> None:  # noqa: F811
    from playwright.sync_api import expect

    expect.set_options(timeout=60_000)  # a loaded shared machine; the first query warms the embedder
    page = browser_page
    errors = sign_in(page, live_server.url)
    expect(page).to_have_url(f"{live_server.url}/ask/")
    expect(page.locator("h1")).to_have_text("Ask your documents")

    # Dutch: the selector posts, the same page comes back in Dutch.
    page.click("form.lang button[value=nl]")
    expect(page).to_have_url(f"{live_server.url}/ask/")
    expect(page.locator("html")).to_have_attribute("lang", "nl")
    expect(page.locator("h1")).to_have_text("Vraag het je documenten")
    expect(page.locator("label[for=id_question]")).to_have_text("Vraag")
    expect(page.locator("#ask-form button[type=submit]")).to_have_text("Vragen")
    expect(page.locator("nav")).to_contain_text("Bronnen")
    expect(page.locator("form.lang button[value=nl]")).to_have_attribute("aria-current", "true")
    count = page.locator("#question-count")  # the script's countdown, in the page's words and numbers
    expect(count).to_have_text("nog 4.000 van 4.000 tekens")
    page.fill("#id_question", "x" * 4010)
    expect(count).to_have_text("10 tekens boven de limiet van 4.000: maak de vraag korter")
    row = ask(page, "Wie heeft in 1954 het wereldkampioenschap voetbal gewonnen?")
    assert (row.answer_class, row.refusal) == ("no_evidence", "gate")
    expect(page.locator("#answer .answer-head .badge")).to_have_text("Geen bewijs in je bronnen")
    expect(page.locator("#answer .outcome")).to_contain_text("Niets in de collecties die je kunt lezen")
    expect(page.locator("#answer .hint")).to_contain_text("upload het op de pagina Bronnen")
    expect(page.locator("#answer")).to_contain_text("Auditregistratie")
    expect(page.locator("label[for=id_question]")).to_have_text("Vervolgvraag")  # the stream's script, in Dutch
    shot(page, "language-1-dutch")

    # German, on the conversation's page: its follow-up asks in German.
    page.click("form.lang button[value=de]")
    expect(page.locator("html")).to_have_attribute("lang", "de")
    expect(page.locator("label[for=id_question]")).to_have_text("Folgefrage")
    expect(page.locator("#ask-form button[type=submit]")).to_have_text("Fragen")
    expect(page.locator("#question-count")).to_have_text("noch 4.000 von 4.000 Zeichen")
    expect(page.locator("#turns .answer-head .badge").first).to_have_text("Geen bewijs in je bronnen")  # still Dutch
    row = ask(page, "Wer hat im Jahr 1954 die Fußballweltmeisterschaft gewonnen?")
    assert row.answer == "Keine passende Antwort in den hochgeladenen Dokumenten gefunden."
    expect(page.locator("#answer .answer-head .badge")).to_have_text("Keine Belege in Ihren Quellen")
    expect(page.locator("#answer .outcome")).to_contain_text("Nichts in den Sammlungen, die Sie lesen können")
    expect(page.locator("#answer")).to_contain_text("Prüfprotokoll")

    # An English question on the German page: its answer is cited, its badge English, the page German.
    row = ask(page, "What is the internal logic supply VCC?")
    assert row.answer_class in ("normal", "low_confidence") and row.citations
    badge = {"normal": "Normal answer", "low_confidence": "Low confidence: the sources match the question only loosely"}
    expect(page.locator("#answer .answer-head .badge")).to_have_text(badge[row.answer_class])
    expect(page.locator("#answer aside.sources h2")).to_have_text("Quellen")
    expect(page.locator("#answer a.cite").first).to_be_visible()
    # The citation's place in the page's words ("Zeilen 4-9"), the stored citation in English.
    where = page.locator("#answer li.source").first.inner_text()
    assert re.search(r"Zeilen? \d", where) and not re.search(r"\blines? \d", where), where
    assert re.search(r"\blines? \d", row.citations[0]["location"]), row.citations[0]
    page.locator("#answer li.source a").first.click()
    expect(page.locator("main .chunk.target .where")).to_contain_text("Zeile")
    assert not re.search(r"\blines? \d", page.locator("main").inner_text())
    page.go_back()
    shot(page, "language-2-german")

    # On a phone the German header (brand, user, selector, links) still fits: nothing scrolls sideways.
    page.set_viewport_size(PHONE)
    page.reload()
    expect(page.locator("html")).to_have_attribute("lang", "de")
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    box = page.locator("form.lang").bounding_box()
    assert box is not None and box["x"] + box["width"] <= PHONE["width"]
    shot(page, "language-3-german-phone")
    assert errors == []
