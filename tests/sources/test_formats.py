"""Word, HTML, PowerPoint, Excel and CSV sources: what is read, where it is, and how it is cited."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest

from retrieval.services.retrieve import retrieve
from sources.models import Chunk, Source
from sources.services.chunking import chunk_blocks
from sources.services.extract import extract
from sources.services.ingest_jobs import knowledge_base_ingest
from tests.sources.office_files import HTML, make_docx, make_pptx, make_xlsx


def words(text: str) -> int:
    return len(text.split())


# --------------------------------------------------------------------------- extraction


def test_docx_headings_lists_tables_and_title(tmp_path: Path) -> None:
    result = extract(Path("m.docx"), make_docx(tmp_path / "m.docx").read_bytes())
    assert result.title == "Pump Manual"
    got = [(b.text, b.heading, b.line_start, b.lead) for b in result.blocks]
    assert got == [
        ("Mount the pump on a level concrete base.", ("Installation",), 1, ""),
        ("- Connect 24 V DC to terminal X1.", ("Installation", "Power supply"), 2, ""),
        ("- Protect the supply with a 2 A fuse.", ("Installation", "Power supply"), 3, ""),
        ("Flow rate | 40 l/min", ("Installation", "Power supply"), 5, "Parameter | Value"),
        ("Pressure | 6 bar", ("Installation", "Power supply"), 6, "Parameter | Value"),
        ("Keep the pump dry and disconnect power before service.", ("Safety",), 7, ""),
    ]


def test_docx_title_falls_back_to_the_first_heading(tmp_path: Path) -> None:
    result = extract(Path("m.docx"), make_docx(tmp_path / "m.docx", title="").read_bytes())
    assert result.title == "Installation"


def test_html_main_content_headings_tables_and_source_lines() -> None:
    result = extract(Path("v.html"), HTML.encode())
    assert result.title == "Valve Guide"
    got = [(b.text, b.heading, b.line_start, b.line_end, b.lead) for b in result.blocks]
    assert got == [
        ("The valve opens at 3 bar and closes at 1 bar.", ("Valve V-200",), 8, 9, ""),
        ("- Brown: +24 V", ("Valve V-200", "Wiring"), 11, 11, ""),
        ("- Blue: 0 V", ("Valve V-200", "Wiring"), 11, 11, ""),
        ("V-200 | 4.0", ("Valve V-200", "Wiring"), 16, 16, "Model | Kv value"),
        ("V-300 | 6.3", ("Valve V-200", "Wiring"), 17, 17, "Model | Kv value"),
    ]
    text = " ".join(b.text for b in result.blocks)
    for absent in ("script", "steal", "Home", "Site banner", "Copyright", "color", "data:", "example.invalid"):
        assert absent not in text


def test_html_title_from_first_h1_and_main_element_only() -> None:
    page = b"<html><body><div>Cookie banner</div><main><h1>Relay R4</h1><p>Coil 12 V.</p></main></body></html>"
    result = extract(Path("r.htm"), page)
    assert result.title == "Relay R4"
    assert [(b.text, b.heading) for b in result.blocks] == [("Coil 12 V.", ("Relay R4",))]


def test_xlsx_rows_under_sheet_with_header_lead_and_cached_values(tmp_path: Path) -> None:
    result = extract(Path("t.xlsx"), make_xlsx(tmp_path / "t.xlsx").read_bytes())
    assert result.title == "Pump table"
    first, *_, last_pump, note = result.blocks
    assert (first.text, first.heading, first.line_start, first.lead) == (
        "P-1 | 11 | 2.6 | 2020-01-02",
        ("Pumps",),
        2,
        "Model | Flow (l/min) | Pressure (bar) | Since",
    )
    assert (last_pump.text, last_pump.line_start) == ("P-60 | 70 | 8.5 | 2020-01-05", 61)
    assert (note.text, note.heading, note.lead) == ("Pumps P-1 to P-9 are discontinued", ("Notes",), "Note")
    assert not any("B3" in b.text or "=" in b.text for b in result.blocks)  # formulas are never text


def test_csv_rows_are_records_led_by_the_header() -> None:
    buffer = io.StringIO()
    csv.writer(buffer).writerows(
        [
            ["name", "ip address", "mask"],
            ["router", "192.168.10.1", "255.255.255.0"],
            ["camera\nnorth", "192.168.10.50", "255.255.255.0"],
            ["", "", ""],
            ["switch", "192.168.10.2", "255.255.255.0"],
        ]
    )
    result = extract(Path("hosts.csv"), buffer.getvalue().encode())
    assert [(b.text, b.line_start, b.lead) for b in result.blocks] == [
        ("router | 192.168.10.1 | 255.255.255.0", 2, "name | ip address | mask"),
        ("camera north | 192.168.10.50 | 255.255.255.0", 3, "name | ip address | mask"),
        ("switch | 192.168.10.2 | 255.255.255.0", 5, "name | ip address | mask"),
    ]


def test_pptx_one_unit_per_slide_with_tables_and_notes(tmp_path: Path) -> None:
    result = extract(Path("d.pptx"), make_pptx(tmp_path / "d.pptx").read_bytes())
    assert result.title == "Quarterly Review"
    got = [(b.text, b.heading, b.page, b.line_start, b.lead, b.unit) for b in result.blocks]
    assert got == [
        ("Pump sales in the northern region", ("Agenda",), 1, 2, "", 1),
        ("- Service contracts renewed", ("Agenda",), 1, 3, "", 1),
        ("Mention the flooded basement pump recall.", ("Agenda", "Notes"), 1, 4, "", 1),
        ("North | 120", ("Figures",), 2, 3, "Region | Units sold", 2),
        ("South | 95", ("Figures",), 2, 4, "Region | Units sold", 2),
        ("Questions and answers", ("Agenda",), 3, 2, "", 3),
    ]


# --------------------------------------------------------------------------- chunking


def test_every_chunk_of_a_table_starts_with_its_header_row(tmp_path: Path) -> None:
    blocks = extract(Path("t.xlsx"), make_xlsx(tmp_path / "t.xlsx", rows=200).read_bytes()).blocks
    drafts = chunk_blocks(blocks, max_tokens=60, count=words)
    pumps = [d for d in drafts if d.heading == ("Pumps",)]
    assert len(pumps) > 5
    header = "Model | Flow (l/min) | Pressure (bar) | Since"
    assert all(d.text.startswith(header + "\n") and d.token_count <= 60 for d in pumps)
    assert [(d.line_start, d.line_end) for d in pumps][:2] == [(2, 7), (8, 13)]  # rows, header not counted
    assert pumps[-1].line_end == 201


def test_slides_never_share_a_chunk_even_with_the_same_title(tmp_path: Path) -> None:
    blocks = extract(Path("d.pptx"), make_pptx(tmp_path / "d.pptx").read_bytes()).blocks
    drafts = chunk_blocks(blocks, max_tokens=200, count=words)
    assert [(d.page_start, d.page_end) for d in drafts] == [(1, 1), (1, 1), (2, 2), (3, 3)]


def test_a_header_row_too_big_to_repeat_stands_once() -> None:
    from sources.services.extract import Block

    lead = " | ".join(f"column {i}" for i in range(60))
    blocks = [Block(f"row {i}", ("S",), None, i, i, lead, 1) for i in range(2, 5)]
    drafts = chunk_blocks(blocks, max_tokens=50, count=words)
    assert drafts[0].text == lead[: len(drafts[0].text)] and sum(d.text.count("column 0 ") for d in drafts) == 1
    assert drafts[-1].text.endswith("row 2\n\nrow 3\n\nrow 4")


# --------------------------------------------------------------------------- ingest and citations


def build_kb(kb: Path) -> None:
    make_docx(kb / "manual.docx")
    (kb / "valves.html").write_text(HTML)
    make_pptx(kb / "review.pptx")
    make_xlsx(kb / "pumps.xlsx")
    (kb / "hosts.csv").write_text("name,ip address\nrouter,192.168.10.1\ncamera,192.168.10.50\n")


@pytest.mark.django_db
def test_every_format_is_ingested_and_cited_in_its_own_terms(kb: Path) -> None:
    build_kb(kb)
    report = {f.path: f for f in knowledge_base_ingest(target=kb).files}
    assert {p: (f.status, f.reason) for p, f in report.items()} == {
        p: ("ingested", "") for p in ("hosts.csv", "manual.docx", "pumps.xlsx", "review.pptx", "valves.html")
    }
    kinds = dict(Source.objects.values_list("path", "kind"))
    assert kinds == {
        "hosts.csv": "csv",
        "manual.docx": "docx",
        "pumps.xlsx": "xlsx",
        "review.pptx": "pptx",
        "valves.html": "html",
    }
    cases = [
        ("which fuse protects the pump supply", "manual.docx", "§ Installation > Power supply, paragraphs 2-3"),
        ("Kv value of valve V-300", "valves.html", "§ Valve V-200 > Wiring, lines 16-17"),
        ("units sold in the South region", "review.pptx", "§ Figures, slide 2, lines 3-4"),
        ("flooded basement pump recall", "review.pptx", "§ Agenda > Notes, slide 1, line"),
        ("discontinued pumps", "pumps.xlsx", "sheet Notes, row 2"),
        ("IP address of the camera", "hosts.csv", "rows 2-3"),
    ]
    for question, path, where in cases:
        found = retrieve(question=question, collection_ids=None, mode="bm25", top_k=3).candidates
        best = next(c for c in found if c.chunk.source.path == path)
        assert best.where.startswith(where), (question, best.where)
    assert knowledge_base_ingest(target=kb).count("unchanged") == 5


@pytest.mark.django_db
def test_sheet_chunks_carry_the_header_and_the_row_range(kb: Path) -> None:
    make_xlsx(kb / "pumps.xlsx", rows=300)
    knowledge_base_ingest(target=kb)
    chunks = list(Chunk.objects.filter(source__path="pumps.xlsx", heading="Pumps").order_by("ordinal"))
    assert len(chunks) > 2
    assert all(c.text.startswith("Model | Flow (l/min) | Pressure (bar) | Since\n") for c in chunks)
    assert chunks[0].line_start == 2 and chunks[-1].line_end == 301
    assert all(a.line_end + 1 == b.line_start for a, b in zip(chunks, chunks[1:]))
    assert chunks[1].location == f"sheet Pumps, rows {chunks[1].line_start}-{chunks[1].line_end}"


@pytest.mark.django_db
def test_json_chunks_label_values_with_their_keys(kb: Path) -> None:
    spec = {
        "name": "AX-200",
        "network": {"ip_address": "192.168.10.50", "subnet_mask": "255.255.255.0", "default_gateway": "192.168.10.1"},
    }
    (kb / "specs.json").write_text(json.dumps(spec, indent=2))
    knowledge_base_ingest(target=kb)
    chunk = Chunk.objects.get(source__path="specs.json", heading="network")
    assert chunk.text == (
        "network.ip_address: 192.168.10.50\nnetwork.subnet_mask: 255.255.255.0\nnetwork.default_gateway: 192.168.10.1"
    )
    found = retrieve(question="default IP address", collection_ids=None, mode="bm25", top_k=3).candidates
    assert found[0].chunk.pk == chunk.pk and found[0].where == "§ network, lines 4-6"


@pytest.mark.django_db
def test_viewer_shows_each_kinds_location_and_download_serves_the_original(kb: Path, make_user: Any) -> None:
    from tests.conftest import login

    build_kb(kb)
    knowledge_base_ingest(target=kb)
    client = login(make_user("root", superuser=True))
    for path, text, where in (
        ("review.pptx", "South | 95", "§ Figures, slide 2, lines 3-4"),
        ("pumps.xlsx", "P-10 |", "sheet Pumps, rows "),
        ("manual.docx", "2 A fuse", "§ Installation &gt; Power supply, paragraphs 2-3"),
        ("hosts.csv", "camera", "rows 2-3"),
    ):
        chunk = Chunk.objects.get(source__path=path, text__contains=text)
        page = client.get(f"/sources/{chunk.source_id}/?chunk={chunk.pk}").content.decode()
        assert f"Showing chunk {chunk.ordinal + 1} of" in page and where in page, (path, where)
        download = client.get(f"/sources/{chunk.source_id}/download")
        assert b"".join(download.streaming_content) == (kb / path).read_bytes()


@pytest.mark.parametrize(
    "data",
    [
        "<html><body><p>Range 12–24 V at 40 °C</p></body></html>".encode(),  # UTF-8, no charset declared
        "\ufeff<html><body><p>Range 12–24 V at 40 °C</p></body></html>".encode(),  # UTF-8 with a BOM
        '<?xml version="1.0" encoding="utf-8"?><html xmlns="http://www.w3.org/1999/xhtml"><body><p>Range 12–24 V at '
        "40 °C</p></body></html>".encode(),  # XHTML declaring its encoding
        '<html><head><meta charset="windows-1252"></head><body><p>Range 12–24 V at 40 °C</p></body></html>'.encode(
            "cp1252"
        ),  # another charset, declared
    ],
)
def test_html_text_is_decoded_as_the_page_says(data: bytes) -> None:
    assert [b.text for b in extract(Path("p.html"), data).blocks] == ["Range 12–24 V at 40 °C"]
