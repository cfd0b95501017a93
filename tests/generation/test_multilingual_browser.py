"""A Dutch and a German question asked on the ask page in a real browser (chromium), the interface in the asker's
language, over Dutch and German manuals: each answer is quoted from the page in the question's language, cited,
and its citation opens that page. The shipped extractive reader and MiniLM, no LLM call.

The manuals are pages of the LibreOffice Writer help as Debian ships them (MPL-2.0; bench/data/multilingual/).
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

from generation.models import QueryLog
from sources.services.collections import collection_create, collection_grant
from sources.services.ingest_jobs import knowledge_base_ingest
from tests.conftest import ScriptedLLM
from tests.generation.test_language_browser import ask
from tests.generation.test_web_browser import shot, sign_in

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

MANUALS = Path(settings.BASE_DIR) / "bench" / "data" / "multilingual"
PAGES = ["print_brochure.html", "search_regexp.html", "text_capital.html"]


@pytest.fixture
def manuals(
    foundry_config: Callable[..., Any], scripted_llm: ScriptedLLM, make_user: Callable[..., Any], kb: Path
) -> ScriptedLLM:
    foundry_config(ingest={"summary_model": "none"}, embedding={"context_model": "none"})
    for lang in ("nl", "de"):
        (kb / lang).mkdir()
        for page in PAGES:
            shutil.copy(MANUALS / lang / "docs" / page, kb / lang / page)
    make_user("alice")
    collection_create(name="handleidingen")
    collection_grant(collection="handleidingen", username="alice")
    knowledge_base_ingest(target=kb, collection="handleidingen")
    return scripted_llm


def test_a_dutch_and_a_german_question_are_answered_from_their_own_manuals(
    browser_page: Any, live_server: Any, manuals: ScriptedLLM
) -> None:
    from playwright.sync_api import expect

    expect.set_options(timeout=60_000)  # a loaded shared machine; the first query warms the embedder
    page = browser_page
    errors = sign_in(page, live_server.url)
    expect(page).to_have_url(f"{live_server.url}/ask/")
    for lang, heading, question, expected, sources, where in (
        (
            "nl",
            "Vraag het je documenten",
            "Welke dubbelzijdige instelling moet de printer gebruiken als ik een brochure afdruk?",
            "korte zijde",
            "Bronnen",
            r"[Rr]egels? \d",
        ),
        (
            "de",
            "Fragen Sie Ihre Dokumente",
            "Welche Duplex-Einstellung brauche ich, um eine Broschüre beidseitig zu drucken?",
            "kurze Seite",
            "Quellen",
            r"Zeilen? \d",
        ),
    ):
        page.goto(f"{live_server.url}/ask/")
        page.click(f"form.lang button[value={lang}]")
        expect(page.locator("html")).to_have_attribute("lang", lang)
        expect(page.locator("h1")).to_have_text(heading)
        row = ask(page, question)
        assert row.answer_class in ("normal", "low_confidence"), (row.answer_class, row.refusal, row.answer)
        assert expected in row.answer, row.answer
        assert {c["source"] for c in row.citations} <= {f"{lang}/{p}" for p in PAGES}, row.citations
        assert f"{lang}/print_brochure.html" in {c["source"] for c in row.citations}
        answer = page.locator("#answer")
        expect(answer).to_contain_text(expected)
        expect(answer.locator("aside.sources h2")).to_have_text(sources)
        place = answer.locator("li.source").first.inner_text()
        assert re.search(where, place), place  # the citation's place in the interface's words
        answer.locator("li.source a").first.click()
        expect(page.locator("main .chunk.target")).to_contain_text(expected)
        shot(page, f"multilingual-{lang}")
    assert QueryLog.objects.filter(llm_calls__gt=0).count() == 0 and manuals.calls == []
    assert errors == []
