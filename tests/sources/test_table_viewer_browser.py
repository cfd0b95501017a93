"""A citation of one table row opens the viewer with that row marked, not the whole table, and its header row shown
unmarked: a spreadsheet's row and a Word table's row, in Chromium.

The files are ingested with the real embedding model and the default extractive reader; each question's answer is
one row of its table.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from generation.models import QueryLog
from sources.models import Chunk
from sources.services.collections import collection_create, collection_grant
from sources.services.ingest_jobs import knowledge_base_ingest
from tests.generation.test_web_browser import shot, sign_in

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

PARTS = [
    ("Part", "Fixing", "Torque"),
    ("Terminal screw", "front terminal block", "0.5 Nm"),
    ("Mounting bolt", "housing to the wall bracket", "12 Nm"),
    ("Cover screw", "transparent front cover", "1.2 Nm"),
    ("Earth stud", "protective earth conductor", "3 Nm"),
]
SETTINGS = [
    ("Setting", "Value"),
    ("Baud rate", "19200 baud"),
    ("Parity", "even parity, one stop bit"),
    ("Reply timeout", "wait 250 ms for a reply before retrying"),
]


@pytest.fixture
def tables(tmp_path: Path, foundry_config: Callable[..., Any], make_user: Callable[..., Any]) -> Path:
    import docx
    import openpyxl

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
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "Torques"
    for row in PARTS[:3]:
        sheet.append(row)
    sheet.append([])  # an empty row: the rows under it are numbered as the sheet numbers them
    for row in PARTS[3:]:
        sheet.append(row)
    book.save(str(folder / "torques.xlsx"))
    document = docx.Document()
    document.add_heading("Serial interface", 1)
    document.add_paragraph("The controller talks Modbus RTU on its serial port.")
    table = document.add_table(rows=len(SETTINGS), cols=2)
    for r, (name, value) in enumerate(SETTINGS):
        table.cell(r, 0).text, table.cell(r, 1).text = name, value
    document.save(str(folder / "serial.docx"))
    report = knowledge_base_ingest(target=folder, collection="manuals")
    assert report.count("failed") == 0, report.as_dict()
    return folder


def cited_row(page: Any, url: str, question: str, source: str) -> tuple[list[int], Chunk]:
    """Ask ``question`` on the ask page at ``url``, check the answer cites one row of ``source``, open that
    citation in the viewer."""
    from playwright.sync_api import expect

    page.goto(f"{url}/ask/")
    page.fill("#id_question", question)
    page.click("#ask-form button[type=submit]")
    link = page.locator("#answer li.source a").first
    expect(link).to_be_visible()
    row = QueryLog.objects.order_by("-pk").first()
    assert row is not None
    citation = row.citations[0]
    assert citation["source"] == source, row.citations
    first, last = citation["lines"]
    assert first == last, citation  # one row, not the chunk's span
    chunk = Chunk.objects.get(pk=citation["chunk_id"])
    assert chunk.line_start < chunk.line_end, chunk.text  # the chunk holds more rows than the one cited
    link.click()
    expect(page.locator(f"#chunk-{chunk.pk} mark").first).to_be_visible()
    return citation["lines"], chunk


def test_a_row_citation_marks_that_row_and_not_the_table(browser_page: Any, live_server: Any, tables: Path) -> None:
    from playwright.sync_api import expect

    expect.set_options(timeout=90_000)  # two shared cores; the first question loads the embedder
    page = browser_page
    errors = sign_in(page, live_server.url)

    lines, chunk = cited_row(page, live_server.url, "What torque does the mounting bolt need?", "torques.xlsx")
    marks = page.locator(f"#chunk-{chunk.pk} mark")
    expect(marks).to_have_count(1)
    expect(marks).to_have_text("Mounting bolt | housing to the wall bracket | 12 Nm")
    assert lines == [3, 3]  # the sheet's row 3, under its header in row 1
    header = page.locator(f"#chunk-{chunk.pk} .line").first
    expect(header).to_have_text("Part | Fixing | Torque")  # shown over the row, not marked
    expect(header.locator("mark")).to_have_count(0)
    numbers = page.locator(f"#chunk-{chunk.pk} .line .n").all_text_contents()
    assert [n for n in numbers if n] == ["2", "3", "5", "6"], numbers  # row 4 is empty in the sheet
    expect(page.locator("main")).to_contain_text("the cited rows are highlighted")
    shot(page, "viewer-sheet-row")

    lines, chunk = cited_row(page, live_server.url, "What reply timeout does the serial interface use?", "serial.docx")
    marks = page.locator(f"#chunk-{chunk.pk} mark")
    expect(marks).to_have_count(1)
    expect(marks).to_have_text("Reply timeout | wait 250 ms for a reply before retrying")
    expect(page.locator(f"#chunk-{chunk.pk} .line").first).to_have_text("Setting | Value")
    texts = page.locator(f"#chunk-{chunk.pk} .line.cited").all_text_contents()
    assert len(texts) == 1 and re.sub(r"^\d+", "", texts[0]).startswith("Reply timeout"), texts
    expect(page.locator("main")).to_contain_text("the cited paragraphs are highlighted")
    assert not errors, errors
