"""A PDF citation opens its original page (pdf.js) with the quote marked, in Chromium, at desktop and phone width;
an OCR'd image's citation boxes the quoted words on the image.

A three-page PDF is ingested with the real embedding model and the default extractive reader; the question's
answer stands on page 2 only, so the citation must open that page, not the first.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from generation.models import QueryLog
from sources.models import Chunk, Source
from sources.services.collections import collection_create, collection_grant
from sources.services.ingest_jobs import knowledge_base_ingest
from tests.conftest import World, make_pdf
from tests.generation.test_web_browser import shot, sign_in
from tests.sources.test_ocr import encoded, needs_tesseract, scanned_page

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

PAGES = [
    ("Installation", "Mount the controller on a DIN rail inside a closed cabinet. Keep 20 mm free on each side."),
    (
        "Relay output",
        "The relay output switches at most 2 A at 30 V DC. Fit a flyback diode across inductive loads such as "
        "solenoid valves, or the contacts wear out early.",
    ),
    ("Maintenance", "Replace the backup battery every five years. Clean the ventilation slots once a year."),
]
QUESTION = "What current can the relay output switch?"

# Of the canvas's pixels, how many are not white: a blank (unrendered) canvas has none.
INKED = """canvas => {
  const data = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height).data;
  let inked = 0;
  for (let i = 0; i < data.length; i += 4) if (data[i] < 200 || data[i + 1] < 200 || data[i + 2] < 200) inked++;
  return inked;
}"""


@pytest.fixture
def controller_pdf(tmp_path: Path, foundry_config: Callable[..., Any], make_user: Callable[..., Any]) -> Path:
    foundry_config(
        ingest={"summary_model": "none"},
        embedding={"context_model": "none"},
        generation={"model": "extractive", "cache_answers": False},
    )
    make_user("alice")
    collection_create(name="manuals")
    collection_grant(collection="manuals", username="alice")
    folder = tmp_path / "manuals"
    folder.mkdir()
    path = make_pdf(folder / "controller.pdf", PAGES, title="Controller manual", footer_line="Page {page}")
    report = knowledge_base_ingest(target=folder, collection="manuals")
    assert report.count("failed") == 0, report.as_dict()
    return path


def test_a_pdf_citation_opens_its_page_with_the_quote_marked(
    browser_page: Any, live_server: Any, controller_pdf: Path
) -> None:
    from playwright.sync_api import expect

    expect.set_options(timeout=90_000)  # two shared cores; the first question loads the embedder
    page = browser_page
    console: list[str] = []
    page.on("console", lambda message: console.append(message.text))
    errors = sign_in(page, live_server.url)
    page.fill("#id_question", QUESTION)
    page.click("#ask-form button[type=submit]")
    link = page.locator("#answer li.source a").first
    expect(link).to_be_visible()
    row = QueryLog.objects.get()
    citation = row.citations[0]
    chunk = Chunk.objects.get(pk=citation["chunk_id"])
    assert chunk.page_start == 2, (chunk.page_start, chunk.text)
    link.click()

    rendered = page.locator("#original [data-page='2']")
    expect(rendered.locator("canvas")).to_be_visible()
    marks = rendered.locator("mark")
    expect(marks.first).to_be_visible()
    marked = " ".join(marks.all_text_contents())
    assert "2 A at 30 V DC" in marked, marked
    assert rendered.locator("canvas").evaluate(INKED) > 500
    expect(page.locator("#original .pdf-status")).to_have_text("The quoted passage is highlighted on this page.")
    # The mark lies over the quoted words on the canvas: inside the page's box.
    page_box, mark_box = rendered.bounding_box(), marks.first.bounding_box()
    assert page_box["y"] <= mark_box["y"] < page_box["y"] + page_box["height"]
    assert page_box["x"] <= mark_box["x"] < page_box["x"] + page_box["width"]
    shot(page, "pdf-viewer-page-2")

    # The text layer is selectable text (what a screen reader reads), and the controls are buttons.
    text = rendered.locator(".textLayer").inner_text()
    assert "flyback diode" in text, text
    next_page = page.get_by_role("button", name="Next ›")
    next_page.focus()
    page.keyboard.press("Enter")
    expect(page.locator("#original [data-page='3'] canvas")).to_be_visible()
    expect(page.locator("#original [data-page='3'] mark")).to_have_count(0)  # the quote is not on page 3
    expect(page.locator("#original .pdf-where")).to_contain_text("Page 3 of 3")
    page.locator("#original .pdf-frame").focus()
    page.keyboard.press("ArrowLeft")
    expect(page.locator("#original [data-page='2'] mark").first).to_be_visible()
    width, zoom = rendered.bounding_box()["width"], page.locator("#original .pdf-where").inner_text()
    page.get_by_role("button", name="Zoom in").click()
    expect(page.locator("#original .pdf-where")).not_to_have_text(zoom)
    assert page.locator("#original [data-page='2']").bounding_box()["width"] > width * 1.2
    page.get_by_role("button", name="Fit width").click()
    expect(page.locator("#original .pdf-where")).to_contain_text("Page 2 of 3")

    # At phone width the page fits the screen and the page does not scroll sideways.
    page.set_viewport_size({"width": 390, "height": 844})
    page.reload()
    expect(page.locator("#original [data-page='2'] mark").first).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    assert page.locator("#original [data-page='2']").bounding_box()["width"] <= 390
    shot(page, "pdf-viewer-phone")

    assert not errors, errors
    assert not [m for m in console if "Content Security Policy" in m or "Content-Security-Policy" in m], console


def pdf_source(world: World, path: Path, text: str, *, page: int) -> Chunk:
    """A PDF source of alice's collection with one chunk of ``text`` on ``page``, written straight to the tables."""
    source = Source.objects.create(
        collection=world.collections["alpha"],
        root=str(path.parent),
        path=path.name,
        title=path.stem,
        kind="pdf",
        status=Source.Status.INGESTED,
        chunk_count=1,
        ingested_at=timezone.now(),
    )
    lines = text.count("\n")
    return Chunk.objects.create(
        source=source,
        ordinal=0,
        text=text,
        page_start=page,
        page_end=page,
        line_start=3,
        line_end=3 + lines,
        token_count=9,
    )


def test_a_hostile_pdf_runs_no_script_and_an_unfound_quote_is_said(
    browser_page: Any, live_server: Any, world: World
) -> None:
    from playwright.sync_api import expect
    from pypdf import PdfReader, PdfWriter
    from pypdf.actions import JavaScript

    root = Path(world.sources["alpha"].root)
    plain = make_pdf(root / "plain.pdf", PAGES)
    writer = PdfWriter(clone_from=PdfReader(plain))
    # Run on opening, in a viewer that runs a PDF's JavaScript: it would leave a dialog and a changed title.
    writer.add_open_action(JavaScript("app.alert('pdf script ran'); this.title = 'pdf script ran';"))
    with (root / "hostile.pdf").open("wb") as out:
        writer.write(out)
    hostile = pdf_source(world, root / "hostile.pdf", PAGES[1][1].split(". ")[0] + ".", page=2)
    elsewhere = pdf_source(world, plain, "A sentence this document does not hold anywhere.", page=2)

    page = browser_page
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    errors = sign_in(page, live_server.url)
    page.goto(f"{live_server.url}/sources/{hostile.source_id}/?chunk={hostile.pk}")
    expect(page.locator("#original [data-page='2'] mark").first).to_be_visible()
    expect(page.locator("#original [data-page='2'] mark").first).to_contain_text("The relay output switches")
    page.wait_for_timeout(1000)
    assert not dialogs and "pdf script ran" not in page.title()

    page.goto(f"{live_server.url}/sources/{elsewhere.source_id}/?chunk={elsewhere.pk}")
    rendered = page.locator("#original [data-page='2']")
    expect(rendered.locator("canvas")).to_be_visible()  # the page is shown all the same
    expect(page.locator("#original .pdf-status")).to_contain_text("could not be located on this page")
    expect(rendered).to_have_attribute("data-located", "none")
    expect(rendered.locator("mark")).to_have_count(0)
    assert rendered.locator("canvas").evaluate(INKED) > 500
    assert not errors, errors


@needs_tesseract
def test_an_ocr_citation_boxes_the_quoted_words_on_the_image(
    browser_page: Any,
    live_server: Any,
    tmp_path: Path,
    foundry_config: Callable[..., Any],
    make_user: Callable[..., Any],
) -> None:
    from playwright.sync_api import expect

    expect.set_options(timeout=90_000)
    foundry_config(
        ingest={"summary_model": "none"},
        embedding={"context_model": "none"},
        generation={"model": "extractive", "cache_answers": False},
    )
    make_user("alice")
    collection_create(name="scans")
    collection_grant(collection="scans", username="alice")
    folder = tmp_path / "scans"
    folder.mkdir()
    (folder / "pump.png").write_bytes(encoded(scanned_page(), "PNG"))
    assert knowledge_base_ingest(target=folder, collection="scans").count("failed") == 0

    page = browser_page
    errors = sign_in(page, live_server.url)
    page.fill("#id_question", "How often should the relief valve be serviced?")
    page.click("#ask-form button[type=submit]")
    link = page.locator("#answer li.source a").first
    expect(link).to_be_visible()
    link.click()
    scan = page.locator("#original [data-page='1']")
    expect(scan.locator("img")).to_be_visible()
    assert scan.locator("img").evaluate("img => img.complete && img.naturalWidth") > 0
    boxes = scan.locator("mark")
    expect(boxes.first).to_be_attached()
    words = boxes.all_text_contents()
    assert {"relief", "valve", "500"} <= set(words), words
    expect(page.locator("#original .pdf-status")).to_have_text(
        "The quoted words, as OCR read them, are boxed on the image."
    )
    image, box = scan.locator("img").bounding_box(), boxes.first.bounding_box()
    assert (
        image["x"] <= box["x"] < image["x"] + image["width"] and image["y"] <= box["y"] < image["y"] + image["height"]
    )
    shot(page, "ocr-viewer")
    assert not errors, errors
