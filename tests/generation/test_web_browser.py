"""The ask, audit and generate pages in a real browser (chromium), with the scripted generator.

The live server runs in this process, so the scripted LLM provider answers: the
test is deterministic and needs no local model, while retrieval, embeddings,
grounding, the stream, the database and the pages are all real.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import Permission, User

from generation.models import QueryFeedback, QueryLog
from sources.models import Chunk
from sources.services.collections import collection_create, collection_grant
from sources.services.ingest_jobs import knowledge_base_ingest
from specs import services
from tests.conftest import PASSWORD, ScriptedLLM
from tests.generation.conftest import DATASHEET, MANUAL, echo_reply

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

DOCUMENT = "# Sensor bus\n\nUp to 8 sensors can be connected to the RS-485 bus [S1].\n"


def shot(page: Any, name: str, *, full: bool = False) -> Path:
    folder = Path(settings.FOUNDRY_HOME) / "screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    page.screenshot(path=str(path), full_page=full)
    keep = os.environ.get("FOUNDRY_SCREENSHOT_DIR")
    if keep:  # e.g. to look at them after the run
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(keep) / path.name)
    return path


def sign_in(page: Any, url: str) -> list[str]:
    """Sign in as alice from the home page; returns the list the page's script errors are collected in."""
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(f"{url}/")
    page.fill("#id_username", "alice")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    return errors


@pytest.fixture
def site(
    foundry_config: Callable[..., Any], scripted_llm: ScriptedLLM, make_user: Callable[..., Any], kb: Path
) -> ScriptedLLM:
    # Integration tests keep the shipped configuration; switch every LLM role to the script.
    foundry_config(
        generation={"model": "scripted/generator"},
        ingest={"summary_model": "none"},
        embedding={"context_model": "none"},
        retrieval={"hyde": False, "scorer_model": "none", "min_chunks": 1},
    )
    make_user("alice")
    collection_create(name="manuals")
    collection_grant(collection="manuals", username="alice")
    (kb / "manual.md").write_text(MANUAL)
    (kb / "datasheet.md").write_text(DATASHEET)
    for name, day in [("manual.md", "2023-05-02"), ("datasheet.md", "2025-03-01")]:  # the datasheet is newer
        stamp = datetime.fromisoformat(f"{day}T12:00:00+00:00").timestamp()
        os.utime(kb / name, (stamp, stamp))
    knowledge_base_ingest(target=kb, collection="manuals")
    author, reviewer = User.objects.create_user("author"), User.objects.create_user("rita")
    reviewer.user_permissions.add(Permission.objects.get(codename="approve_featurespec"))
    services.spec_create(name="wiring-guide", title="Wiring guide", body="# Wiring\n\nA short guide.\n", by=author)
    services.spec_submit(name="wiring-guide", by=author)
    services.spec_approve(name="wiring-guide", by=User.objects.get(pk=reviewer.pk))
    scripted_llm.reply = lambda m: DOCUMENT if m[-1]["content"].startswith("Topic:") else echo_reply(m)
    return scripted_llm


def test_ask_audit_and_generate(browser_page: Any, live_server: Any, site: ScriptedLLM, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    expect.set_options(timeout=60_000)  # a loaded shared machine; the first query warms the embedder
    page = browser_page
    errors = sign_in(page, live_server.url)
    expect(page).to_have_url(f"{live_server.url}/ask/")

    # Ask (JavaScript on: the streamed stages, then the checked answer).
    page.fill("#id_question", "What is the internal logic supply VCC?")
    page.click("#ask-form button[type=submit]")
    expect(page.locator("#answer")).to_be_visible()
    row = QueryLog.objects.get()
    expect(page).to_have_url(f"{live_server.url}/conversations/{row.conversation_id}/#turn-{row.pk}")
    expect(page.locator(".conflict")).to_contain_text("VCC")
    newer = page.locator(".conflict-side", has_text="datasheet.md")
    expect(newer).to_contain_text("dated 2025-03-01")
    expect(newer.locator(".newest")).to_have_text("newest")
    expect(page.locator(".conflict-side", has_text="manual.md")).to_contain_text("dated 2023-05-02")
    expect(page.locator(".conflict .newest")).to_have_count(1)
    expect(page.locator(".answer-head .badge")).to_have_attribute("data-answer-class", row.answer_class)
    expect(page.locator(".sources li")).to_have_count(len(row.citations))
    assert row.citations and page.locator("a.cite").count() >= 1
    conflict_box = page.locator(".conflict").first.bounding_box()
    answer_box = page.locator(".answer-body").bounding_box()
    sources_box = page.locator("aside.sources").bounding_box()
    assert conflict_box["y"] < answer_box["y"] and sources_box["x"] > answer_box["x"]  # above; beside
    shot(page, "web-1-answer")

    # A source link lands on the highlighted chunk in the viewer.
    first = row.citations[0]
    page.click(f"#source-{first['id']} a")
    chunk = Chunk.objects.get(pk=first["chunk_id"])
    first_line, last_line = first["lines"]
    viewer = f"/sources/{chunk.source_id}/?chunk={chunk.pk}&lines={first_line}-{last_line}#chunk-{chunk.pk}"
    expect(page).to_have_url(live_server.url + viewer)
    expect(page.locator(f"#chunk-{chunk.pk}")).to_have_class("chunk target")
    expect(page.locator(f"#chunk-{chunk.pk}")).to_be_in_viewport()
    assert chunk.numbered_lines(), chunk.text  # a Markdown chunk maps line by line: its cited lines are marked
    cited = page.locator(f"#chunk-{chunk.pk} .line.cited")
    expect(cited).to_have_count(last_line - first_line + 1)
    expect(cited.first).to_be_in_viewport()
    shot(page, "web-2-viewer")
    page.go_back()

    # Feedback with a note.
    page.fill(".feedback input[name=note]", "matches the datasheet <img src=x onerror=alert(1)>")
    page.click(".feedback button[value=correct]")
    expect(page.locator(".messages li.success")).to_contain_text("feedback is recorded")
    expect(page.locator(".feedback-list")).to_contain_text("matches the datasheet <img src=x onerror=alert(1)>")
    assert QueryFeedback.objects.get().verdict == "correct"

    # Find it in the query log and filter.
    page.click("nav >> text=Query log")
    expect(page.locator(f"#query-{row.pk}")).to_be_visible()
    page.select_option("#id_feedback", "correct")
    page.click("text=Filter")
    expect(page.locator(f"#query-{row.pk}")).to_be_visible()
    shot(page, "web-3-querylog")
    page.select_option("#id_feedback", "none")
    page.click("text=Filter")
    expect(page.locator("text=No queries match.")).to_be_visible()
    page.goto(f"{live_server.url}/query-log/{row.pk}/")
    expect(page.locator("#feedback-list")).to_contain_text("matches the datasheet")
    shot(page, "web-4-detail", full=True)
    page.goto(f"{live_server.url}/dashboard/")
    expect(page.locator("#kpi-total")).to_have_text("1")
    shot(page, "web-5-dashboard")

    # Generate a document and download it.
    page.click("nav >> text=Generate")
    page.fill("#id_topic", "sensors on the RS-485 bus")
    page.select_option("#id_feature", "wiring-guide")
    page.click("button:has-text('Generate')")
    expect(page.locator("#document h1")).to_have_text("Sensor bus")
    expect(page.locator("#run-status")).to_have_text("Succeeded")
    shot(page, "web-6-run")
    with page.expect_download() as download:
        page.click("text=Download .md")
    assert download.value.suggested_filename == "wiring-guide-sensors-on-the-rs-485-bus.md"
    saved = tmp_path / "downloaded.md"
    download.value.save_as(saved)
    assert "[^1]" in saved.read_text() and "## Sources" in saved.read_text()
    assert errors == []


@contextlib.contextmanager
def signed_in_without_javascript(browser_page: Any, url: str) -> Iterator[Any]:
    """A page of a new browser context with JavaScript off, signed in as alice."""
    context = browser_page.context.browser.new_context(
        java_script_enabled=False, viewport={"width": 1280, "height": 860}
    )
    page = context.new_page()
    try:
        page.goto(f"{url}/accounts/login/")
        page.fill("#id_username", "alice")
        page.fill("#id_password", PASSWORD)
        page.click("button[type=submit]")
        yield page
    finally:
        context.close()


def test_ask_works_without_javascript(browser_page: Any, live_server: Any, site: ScriptedLLM) -> None:
    from playwright.sync_api import expect

    expect.set_options(timeout=60_000)
    with signed_in_without_javascript(browser_page, live_server.url) as page:
        page.fill("#id_question", "How many sensors can be connected to the RS-485 bus?")
        page.click("#ask-form button[type=submit]")
        expect(page.locator("#answer")).to_be_visible()
        expect(page.locator("aside.sources")).to_contain_text("manual.md")
        shot(page, "web-7-nojs")


@pytest.fixture
def extractive_site(site: ScriptedLLM, foundry_config: Callable[..., Any]) -> ScriptedLLM:
    """The same site on the shipped default reader: quotes, no LLM."""
    foundry_config(generation={"model": "extractive"})
    services.spec_create(
        name="bus-guide",
        title="Bus guide",
        body="# Bus guide\n\n## Power supply\n\n## Sensor bus\n",
        by=User.objects.get(username="author"),
    )
    services.spec_submit(name="bus-guide", by=User.objects.get(username="author"))
    services.spec_approve(name="bus-guide", by=User.objects.get(username="rita"))
    return site


def test_ask_and_generate_with_the_extractive_reader(
    browser_page: Any, live_server: Any, extractive_site: ScriptedLLM
) -> None:
    from playwright.sync_api import expect

    expect.set_options(timeout=60_000)
    page = browser_page
    errors = sign_in(page, live_server.url)
    expect(page.locator("#stages li[data-stage=reading]")).to_have_text("Choosing the sentences to quote")
    page.fill("#id_question", "How many sensors can be connected to the RS-485 bus?")
    page.click("#ask-form button[type=submit]")
    expect(page.locator("#answer")).to_be_visible()
    row = QueryLog.objects.get()
    assert row.model == "extractive" and row.llm_calls == 0 and not extractive_site.calls
    expect(page.locator(".answer-body")).to_contain_text("Up to 8 sensors can be connected to the RS-485 bus.")
    manual = next(c for c in row.citations if c["source"] == "manual.md")
    expect(page.locator(f"#source-{manual['id']}")).to_contain_text(manual["location"])  # the sentence's own line
    shot(page, "web-8-extractive-answer")
    page.click(f"#source-{manual['id']} a")
    chunk = Chunk.objects.get(pk=manual["chunk_id"])
    expect(page.locator(f"#chunk-{chunk.pk}")).to_contain_text("Up to 8 sensors can be connected")

    page.click("nav >> text=Generate")
    page.fill("#id_topic", "sensors on the RS-485 bus")
    page.select_option("#id_feature", "bus-guide")
    page.click("button:has-text('Generate')")
    expect(page.locator("#run-status")).to_have_text("Succeeded")
    expect(page.locator("#document h2").first).to_have_text("Power supply")
    expect(page.locator("#document")).to_contain_text("Up to 8 sensors can be connected to the RS-485 bus.")
    shot(page, "web-9-extractive-document", full=True)
    assert errors == []


FIRST = "How many sensors can be connected to the RS-485 bus?"
FOLLOW = "And how must it be terminated?"


def test_a_two_turn_conversation_streams_on_the_ask_page(
    browser_page: Any, live_server: Any, extractive_site: ScriptedLLM
) -> None:
    from playwright.sync_api import expect

    expect.set_options(timeout=60_000)
    page = browser_page
    errors = sign_in(page, live_server.url)
    page.fill("#id_question", FIRST)
    page.click("#ask-form button[type=submit]")
    page.fill("#id_question", FOLLOW)  # typed while the first answer is on its way
    expect(page.locator("#turns article.turn")).to_have_count(1)
    expect(page.locator("#answer")).to_be_visible()
    first = QueryLog.objects.get()
    expect(page).to_have_url(f"{live_server.url}/conversations/{first.conversation_id}/#turn-{first.pk}")
    expect(page.locator("#chat-title")).to_have_text(FIRST)  # the question answered, not the one typed since
    expect(page.locator("#id_question")).to_have_value(FOLLOW)  # and what was typed is kept
    expect(page.locator("label[for=id_question]")).to_have_text("Follow-up question")
    expect(page.locator("#chat-meta")).to_contain_text("A follow-up is read together with the earlier questions.")

    page.click("#ask-form button[type=submit]")
    expect(page.locator("#turns article.turn:not(.pending)")).to_have_count(2)
    second = QueryLog.objects.exclude(pk=first.pk).get()
    assert second.conversation_id == first.conversation_id and second.message == FOLLOW
    assert any("terminated" in Chunk.objects.get(pk=c["chunk_id"]).text for c in second.citations)
    expect(page).to_have_url(f"{live_server.url}/conversations/{first.conversation_id}/#turn-{second.pk}")
    latest = page.locator(f"#turn-{second.pk}")
    expect(latest.locator("#answer .badge")).to_have_attribute("data-answer-class", second.answer_class)
    expect(latest.locator(".answer-text")).to_contain_text(second.answer.split(" [S")[0])
    expect(page.locator("#answer")).to_have_count(1)  # the first turn gave up the plain ids
    expect(page.locator(f"#turn-{first.pk} #t{first.pk}-answer")).to_be_visible()
    expect(latest.locator("form.feedback")).to_be_visible()
    shot(page, "web-10-conversation", full=True)

    page.reload()  # the conversation page as the server renders it: the same two turns
    expect(page.locator("#turns article.turn")).to_have_count(2)
    expect(page.locator("#chat-title")).to_have_text(FIRST)
    expect(page.locator("#chat-meta")).to_have_count(1)  # as the page streamed it showed it
    page.click("#new-conversation")
    expect(page).to_have_url(f"{live_server.url}/ask/")
    expect(page.locator("#conversation-list")).to_contain_text(FIRST)
    page.fill("#id_question", FIRST)  # a new conversation: the start page's lists make way for it
    page.click("#ask-form button[type=submit]")
    expect(page.locator("#turns article.turn:not(.pending)")).to_have_count(1)
    expect(page.locator("#conversation-list")).to_have_count(0)
    assert errors == []


def test_a_conversation_works_without_javascript(
    browser_page: Any, live_server: Any, extractive_site: ScriptedLLM
) -> None:
    from playwright.sync_api import expect

    expect.set_options(timeout=60_000)
    with signed_in_without_javascript(browser_page, live_server.url) as page:
        page.fill("#id_question", FIRST)
        page.click("#ask-form button[type=submit]")
        first = QueryLog.objects.get()
        expect(page).to_have_url(f"{live_server.url}/conversations/{first.conversation_id}/#turn-{first.pk}")
        page.fill("#id_question", FOLLOW)
        page.click("#ask-form button[type=submit]")
        expect(page.locator("#turns article.turn")).to_have_count(2)
        second = QueryLog.objects.exclude(pk=first.pk).get()
        expect(page).to_have_url(f"{live_server.url}/conversations/{first.conversation_id}/#turn-{second.pk}")
        expect(page.locator(f"#turn-{second.pk} .standalone")).to_contain_text("Answered as:")
        expect(page.locator(f"#turn-{second.pk} .answer-text")).to_contain_text(second.answer.split(" [S")[0])
        shot(page, "web-11-conversation-nojs", full=True)
        page.click("text=All conversations")
        expect(page.locator("table.conversations tbody tr")).to_have_count(1)
        expect(page.locator("table.conversations")).to_contain_text(FIRST)
