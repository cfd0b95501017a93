"""Structure Office and HTML files draw but do not spell out: list numbers, definition lists, charts."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import call_command

from sources.models import Chunk
from sources.services.extract import ExtractionError, extract
from sources.services.ingest_jobs import knowledge_base_ingest
from tests.sources.office_files import add_docx_chart, add_numbering, chart_xml, numbered


def docx_bytes(build: object) -> bytes:
    import docx

    document = docx.Document()
    build(document)  # type: ignore[operator]
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def texts(name: str, data: bytes) -> list[str]:
    return [b.text for b in extract(Path(name), data).blocks]


# --------------------------------------------------------------------------- Word numbering


def numbered_procedure(document: object) -> None:
    first, again = add_numbering(document, restart_at=1)
    document.add_heading("Start-up", 1)  # type: ignore[attr-defined]
    numbered(document, "Open the inlet valve.", num_id=first)
    numbered(document, "Check the seal.", num_id=first, level=1)
    numbered(document, "Check the gauge.", num_id=first, level=1)
    numbered(document, "Start the pump.", num_id=first)
    numbered(document, "Wait ten seconds.", num_id=first, level=2)
    numbered(document, "Close the bypass.", num_id=first, level=1)
    document.add_paragraph("Shut-down is the other way round.")  # type: ignore[attr-defined]
    numbered(document, "Stop the pump.", num_id=again)
    numbered(document, "Close the inlet valve.", num_id=again)
    document.add_paragraph("A spare seal", style="List Bullet")  # type: ignore[attr-defined]
    document.add_paragraph("Flush the line.", style="List Number")  # type: ignore[attr-defined]
    document.add_paragraph("Drain the tank.", style="List Number")  # type: ignore[attr-defined]


def test_word_numbering_is_drawn_as_word_draws_it() -> None:
    assert texts("p.docx", docx_bytes(numbered_procedure)) == [
        "1. Open the inlet valve.",
        "a) Check the seal.",
        "b) Check the gauge.",
        "2. Start the pump.",
        "2.1. Wait ten seconds.",
        "a) Close the bypass.",  # a deeper level restarts under each item of the one above
        "Shut-down is the other way round.",
        "1. Stop the pump.",  # a list that restarts its numbering
        "2. Close the inlet valve.",
        "- A spare seal",  # bullets stay bullets
        "1. Flush the line.",  # numbering set by the "List Number" style
        "2. Drain the tank.",
    ]


def test_a_restart_at_another_number_counts_from_there() -> None:
    def build(document: object) -> None:
        _, again = add_numbering(document, restart_at=7)
        numbered(document, "Seventh step.", num_id=again)
        numbered(document, "Eighth step.", num_id=again)

    assert texts("r.docx", docx_bytes(build)) == ["7. Seventh step.", "8. Eighth step."]


# --------------------------------------------------------------------------- definition lists

DEFINITIONS_HTML = b"""<!DOCTYPE html><html><head><title>Column types</title></head><body>
<h1>Column types</h1>
<dl>
<dt>varchar</dt>
<dd>Almost always has a limit of 255 chars.</dd>
<dt>text</dt><dt>clob</dt>
<dd>No limit on its length.</dd>
</dl>
<dl><dt>undefined term</dt></dl>
</body></html>"""


def test_html_definition_list_reads_term_colon_definition() -> None:
    blocks = extract(Path("t.html"), DEFINITIONS_HTML).blocks
    assert [(b.text, b.line_start, b.line_end) for b in blocks] == [
        ("varchar: Almost always has a limit of 255 chars.", 4, 5),
        ("text, clob: No limit on its length.", 6, 7),
        ("undefined term", 9, 9),
    ]


def label_value_table(document: object) -> None:
    document.add_heading("Column types", 1)  # type: ignore[attr-defined]
    rows = [("varchar", "Almost always has a limit of 255 chars."), ("integer", "Four bytes, signed.")]
    table = document.add_table(rows=2, cols=2)  # type: ignore[attr-defined]
    for r, (term, definition) in enumerate(rows):
        table.cell(r, 0).text, table.cell(r, 1).text = term, definition
    header = document.add_table(rows=2, cols=2)  # type: ignore[attr-defined]
    for r, (a, b) in enumerate([("Parameter", "Value"), ("Flow rate", "40 l/min")]):
        header.cell(r, 0).text, header.cell(r, 1).text = a, b


def test_word_two_column_table_without_header_is_a_definition_list() -> None:
    blocks = extract(Path("d.docx"), docx_bytes(label_value_table)).blocks
    assert [(b.text, b.lead, b.line_start) for b in blocks] == [
        ("varchar: Almost always has a limit of 255 chars.", "", 1),
        ("integer: Four bytes, signed.", "", 2),
        ("Flow rate | 40 l/min", "Parameter | Value", 4),  # a table with a header row stays a table
    ]


# --------------------------------------------------------------------------- charts

SALES = {"Sold": [120.0, 95.0], "Returned": [4.5, 3.0]}


def chart_only_pptx() -> bytes:
    import pptx
    from pptx.chart.data import CategoryChartData
    from pptx.enum.chart import XL_CHART_TYPE
    from pptx.util import Inches

    deck = pptx.Presentation()
    deck.slides.add_slide(deck.slide_layouts[6])
    slide = deck.slides.add_slide(deck.slide_layouts[6])  # blank: no title, no text box
    data = CategoryChartData()
    data.categories = ["North", "South"]
    for name, values in SALES.items():
        data.add_series(name, values)
    frame = slide.shapes.add_chart(XL_CHART_TYPE.COLUMN_CLUSTERED, Inches(1), Inches(1), Inches(6), Inches(4), data)
    frame.chart.has_title = True
    frame.chart.chart_title.text_frame.text = "Pump sales by region"
    frame.chart.category_axis.axis_title.text_frame.text = "Region"
    out = io.BytesIO()
    deck.save(out)
    return out.getvalue()


def chart_xlsx() -> bytes:
    import openpyxl
    from openpyxl.chart import BarChart, Reference

    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "Data"
    for row in (["Region", "Sold", "Returned"], ["North", 120, 4.5], ["South", 95, 3]):
        sheet.append(row)
    chart = BarChart()
    chart.title = "Pump sales by region"
    chart.add_data(Reference(sheet, min_col=2, min_row=1, max_col=3, max_row=3), titles_from_data=True)
    chart.set_categories(Reference(sheet, min_col=1, min_row=2, max_row=3))
    sheet.add_chart(chart, "E7")
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


def chart_docx(document: object) -> None:
    document.add_heading("Sales", 1)  # type: ignore[attr-defined]
    document.add_paragraph("The figures of the year.")  # type: ignore[attr-defined]
    add_docx_chart(document, chart_xml("Pump sales by region", ["North", "South"], SALES))
    document.add_paragraph("Figures are units shipped.")  # type: ignore[attr-defined]


LEAD = "Pump sales by region\n | Sold | Returned"


def test_pptx_chart_is_a_table_on_its_slide_and_a_chart_only_deck_is_read() -> None:
    blocks = extract(Path("c.pptx"), chart_only_pptx()).blocks
    lead = "Pump sales by region\nRegion | Sold | Returned"  # the category axis's title heads the first column
    assert [(b.text, b.lead, b.page, b.line_start) for b in blocks] == [
        ("North | 120 | 4.5", lead, 2, 3),
        ("South | 95 | 3", lead, 2, 4),
    ]


def test_xlsx_chart_is_a_table_under_its_sheet_at_its_anchor_row() -> None:
    blocks = [b for b in extract(Path("c.xlsx"), chart_xlsx()).blocks if b.lead.startswith("Pump")]
    assert [(b.text, b.heading, b.line_start) for b in blocks] == [
        ("North | 120 | 4.5", ("Data",), 7),
        ("South | 95 | 3", ("Data",), 7),
    ]
    assert blocks[0].lead == LEAD


def test_docx_chart_is_a_table_between_its_paragraphs() -> None:
    blocks = extract(Path("c.docx"), docx_bytes(chart_docx)).blocks
    assert [(b.text, b.lead, b.line_start) for b in blocks] == [
        ("The figures of the year.", "", 1),
        ("North | 120 | 4.5", LEAD, 4),
        ("South | 95 | 3", LEAD, 5),
        ("Figures are units shipped.", "", 6),
    ]


def test_a_damaged_chart_part_is_refused_naming_where_it_is() -> None:
    def build(document: object) -> None:
        add_docx_chart(document, b"<c:chartSpace")

    with pytest.raises(ExtractionError, match="damaged chart on paragraph 1"):
        extract(Path("b.docx"), docx_bytes(build))


# --------------------------------------------------------------------------- end to end


@pytest.fixture
def structured_kb(kb: Path) -> Path:
    (kb / "procedure.docx").write_bytes(docx_bytes(numbered_procedure))
    (kb / "types.html").write_bytes(DEFINITIONS_HTML)
    (kb / "columns.docx").write_bytes(docx_bytes(label_value_table))
    (kb / "sales.pptx").write_bytes(chart_only_pptx())
    (kb / "sales.xlsx").write_bytes(chart_xlsx())
    (kb / "report.docx").write_bytes(docx_bytes(chart_docx))
    return kb


def query(question: str) -> dict:
    out = io.StringIO()
    call_command("foundry", "query", "--json", "--", question, stdout=out)
    return json.loads(out.getvalue())


@pytest.mark.django_db
def test_numbers_definitions_and_charts_are_ingested_chunked_and_cited(
    structured_kb: Path, foundry_config: object
) -> None:
    foundry_config(generation={"model": "extractive"}, retrieval={"min_chunks": 1})  # type: ignore[operator]
    report = {f.path: (f.status, f.reason) for f in knowledge_base_ingest(target=structured_kb).files}
    assert set(report.values()) == {("ingested", "")}, report
    procedure = Chunk.objects.get(source__path="procedure.docx")
    assert "2. Start the pump.\n\n2.1. Wait ten seconds." in procedure.text
    sales = list(Chunk.objects.filter(source__path="sales.pptx"))
    assert [c.text for c in sales] == [
        "Pump sales by region\nRegion | Sold | Returned\nNorth | 120 | 4.5\n\nSouth | 95 | 3"
    ]
    assert sales[0].location == "§ Slide 2, slide 2, lines 3-4"
    cases = [
        (
            "What is the limit of a varchar?",
            "varchar: Almost always has a limit of 255 chars.",
            {"types.html", "columns.docx"},
        ),
        ("Which types have no limit on their length?", "text, clob: No limit on its length.", {"types.html"}),
        (
            "How many pumps were returned in the South region?",
            "South | 95 | 3",
            {"sales.pptx", "sales.xlsx", "report.docx"},
        ),
        ("How many seconds should one wait?", "Wait ten seconds.", {"procedure.docx"}),
    ]
    for question, quoted, sources in cases:
        body = query(question)
        assert body["answer_class"] in ("normal", "low_confidence"), (question, body)
        assert quoted in body["answer"], (question, body["answer"])
        assert {c["source"] for c in body["citations"]} & sources, (question, body["citations"])
