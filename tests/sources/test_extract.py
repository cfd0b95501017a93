from __future__ import annotations

import json
from pathlib import Path

import pytest

from sources.services.extract import ExtractionError, extract
from tests.conftest import TABLE_PDF_ROWS, make_pdf, make_table_pdf

MD = """# Widget Manual

Intro paragraph.

## Installation

Mount the widget.

### Power

Connect 12 V DC.
Use a fused supply.

```
# not a heading inside code
```

## Safety

Keep dry.
"""


@pytest.mark.parametrize(
    ("text", "title"),
    [
        (
            "Aurora AX-200 - Firmware Release Notes\nNordlicht\n\nVersion 2.4.1\nFixed: a bug.\n",
            "Aurora AX-200 - Firmware Release Notes",
        ),
        ("Firmware 2.4.1 fixes the alarm hysteresis bug.\n", "notes"),  # a sentence says, it does not name
        ("Wiring rules:\nUse twisted pairs.\n", "notes"),  # runs on into the next line
        ("\n\n2026-06-09\nFixed: a bug.\n", "notes"),  # no letter
        ("A first line of sixty characters or more is prose that wraps on\nto the next line.\n", "notes"),
        ("This manual describes how to install\nthe gateway on a rail.\n", "notes"),  # wrapped prose
        # A frame of decoration lines around a heading: the heading names it, not the rule.
        ("# " + "=" * 76 + "\n# HybridRAG Requirements\n# " + "=" * 76 + "\n\nBody.\n", "HybridRAG Requirements"),
        ("-----\n\nPump Controller Notes\n\nThe pump stops.\n", "Pump Controller Notes"),
        ("# ====\n# ====\n\nThe pump stops on a dry run.\n", "notes"),  # no heading inside the frame
    ],
)
def test_a_text_file_is_titled_by_its_first_line_when_that_names_it(text: str, title: str) -> None:
    result = extract(Path("notes.txt"), text.encode())
    assert result.title == title
    assert result.blocks[0].text.startswith(text.strip().split("\n")[0])  # the line stays in the text


def test_a_markdown_rule_drawn_as_a_heading_is_neither_title_nor_heading() -> None:
    frame = "# " + "=" * 76
    result = extract(Path("req.md"), f"{frame}\n# Requirements\n{frame}\n\n## Goal\n\nAnswer from sources.\n".encode())
    assert result.title == "Requirements"
    assert [b.heading for b in result.blocks] == [(), ("Requirements",), ("Requirements", "Goal")]
    assert result.blocks[0].text == frame and result.blocks[1].text == frame  # kept as text


def test_markdown_heading_paths_and_lines() -> None:
    result = extract(Path("m.md"), MD.encode())
    assert result.title == "Widget Manual"
    by_text = {b.text.split("\n")[0]: b for b in result.blocks}
    power = by_text["Connect 12 V DC."]
    assert power.heading == ("Widget Manual", "Installation", "Power")
    assert (power.line_start, power.line_end) == (11, 12)
    assert by_text["Keep dry."].heading == ("Widget Manual", "Safety")
    code = by_text["```"]
    assert code.heading == ("Widget Manual", "Installation", "Power")
    assert "# not a heading" in code.text


def test_text_paragraph_line_spans() -> None:
    result = extract(Path("notes.txt"), b"first line\nsecond line\n\n\nthird para\n")
    assert [(b.text, b.line_start, b.line_end) for b in result.blocks] == [
        ("first line\nsecond line", 1, 2),
        ("third para", 5, 5),
    ]
    assert result.title == "notes"


def test_json_values_only_with_key_path() -> None:
    doc = {
        "title": "Spec",
        "electrical": {"vcc": "3.3 V", "current_ma": 120},
        "ports": ["RS-485", "Ethernet"],
        "enabled": True,
    }
    result = extract(Path("s.json"), json.dumps(doc, indent=2).encode())
    texts = {b.heading: b.text for b in result.blocks}
    assert texts[("electrical",)] == "electrical.vcc: 3.3 V\nelectrical.current_ma: 120"
    assert texts[("ports",)] == "ports[0]: RS-485\nports[1]: Ethernet"
    assert texts[()] == "title: Spec"  # booleans and nulls say nothing a reader can cite
    assert not any(mark in b.text for b in result.blocks for mark in '{}"')
    assert result.title == "Spec"
    assert next(b for b in result.blocks if b.heading == ("electrical",)).line_start == 4


def test_json_block_lines_are_where_the_values_are() -> None:
    # a container's own values around a nested one, and a number that also occurs further down ("120 Ohm")
    text = (
        '{\n  "main": {\n    "range": {"min": 12, "max": 24},\n    "type": "DC",\n    "fuse": "1 A"\n  },\n'
        '  "logic": {\n    "name": "VCC",\n    "volts": 3.3\n  },\n  "bus": {"termination": "120 Ohm"}\n}\n'
    )
    blocks = {b.heading: (b.text, b.line_start, b.line_end) for b in extract(Path("s.json"), text.encode()).blocks}
    assert blocks == {
        ("main",): ("main.type: DC\nmain.fuse: 1 A", 4, 5),
        ("main", "range"): ("main.range.min: 12\nmain.range.max: 24", 3, 3),
        ("logic",): ("logic.name: VCC\nlogic.volts: 3.3", 8, 9),
        ("bus",): ("bus.termination: 120 Ohm", 11, 11),
    }


def test_json_numbers_keep_their_written_form() -> None:
    result = extract(Path("n.json"), b'{"max_w": 4.0, "big": 1e400, "rate": 1E3, "n": -0, "id": 12345678901234567890}')
    assert result.blocks[0].text == "max_w: 4.0\nbig: 1e400\nrate: 1E3\nn: -0\nid: 12345678901234567890"


def test_json_values_keep_their_key_paths_through_lists_and_odd_keys() -> None:
    """The sample specs' default IP settings: each value says which setting it is."""
    doc = {
        "network": {
            "ip_address": "192.168.10.50",
            "subnet mask": "255.255.255.0",
            "servers": [{"host": "ntp1"}, "10.0.0.1"],
        },
        "k" * 500: {"v": "x"},
    }
    blocks = {b.heading: b.text for b in extract(Path("s.json"), json.dumps(doc).encode()).blocks}
    assert blocks[("network",)] == "network.ip_address: 192.168.10.50\nnetwork.subnet mask: 255.255.255.0"
    assert blocks[("network", "servers")] == "network.servers[1]: 10.0.0.1"
    assert blocks[("network", "servers", "[0]")] == "network.servers[0].host: ntp1"
    long_key = next(text for heading, text in blocks.items() if heading and heading[0].startswith("kkk"))
    assert long_key == "k" * 79 + "….v: x"  # a key is cut, never a value


def test_json_label_of_a_deep_path_keeps_its_end() -> None:
    doc: object = "deep value"
    for level in range(40):
        doc = {f"level_{level:02d}_" + "x" * 20: doc}
    (block,) = extract(Path("d.json"), json.dumps(doc).encode()).blocks
    label, value = block.text.split(": ")
    assert value == "deep value" and label.startswith("…") and label.endswith("level_00_" + "x" * 20)
    assert len(label) == 160


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_json_nan_and_infinity_are_refused(constant: str) -> None:
    with pytest.raises(ExtractionError, match=f"{constant} is not a JSON value"):
        extract(Path("n.json"), f'{{"speed": {constant}}}'.encode())


def test_pdf_pages_and_outline_headings(tmp_path: Path) -> None:
    pdf = make_pdf(
        tmp_path / "d.pdf",
        [("1 Overview", "The gateway collects data."), ("2 Power", "VCC is 5 V on revision two.")],
        title="Data Sheet",
    )
    result = extract(pdf, pdf.read_bytes())
    assert result.title == "Data Sheet"
    power = [b for b in result.blocks if "VCC" in b.text]
    assert power and power[0].page == 2 and power[0].heading == ("2 Power",)
    assert {b.page for b in result.blocks} == {1, 2}


def test_pdf_running_header_and_footer_are_left_out(tmp_path: Path) -> None:
    pages = [
        ("1 Overview", "The gateway collects data.\nIt sends them on."),
        ("2 Power", "VCC is 5 V.\nThe input is 24 V."),
        ("3 Mounting", "On a rail.\nIn a cabinet."),
    ]
    running = {"header_line": "ACME AX-9 Sensor Gateway - Datasheet - Rev. 2", "footer_line": "Page {page} of 3"}
    pdf = make_pdf(tmp_path / "d.pdf", pages, **running)
    blocks = extract(pdf, pdf.read_bytes()).blocks
    assert [(b.page, b.line_start, b.text) for b in blocks] == [
        (n, 2, f"{heading}\n{text}") for n, (heading, text) in enumerate(pages, start=1)
    ]  # the header was line 1 of each page: the lines after it keep their numbers
    single = make_pdf(tmp_path / "s.pdf", pages[:1], **running)  # one page: nothing runs over pages
    assert "Datasheet - Rev. 2" in extract(single, single.read_bytes()).blocks[0].text
    # a chapter's header runs over three pages of a longer document, not over half of them
    topics = "power wiring mounting network alarms buffer firmware disposal".split()
    chapters = make_pdf(
        tmp_path / "c.pdf",
        [(f"About {t}", f"The {t} comes first.\nThen {t} again.\nLast on {t}.") for t in topics],
        header_line=lambda page: f"Chapter 1: Basics {page}" if page <= 3 else f"Chapter 2: Wiring {page}",
    )
    texts = [b.text for b in extract(chapters, chapters.read_bytes()).blocks]
    assert texts == [f"About {t}\nThe {t} comes first.\nThen {t} again.\nLast on {t}." for t in topics]
    # a page that says no more than its edges keeps them; a lone number could be a value as well as a page's
    labels = make_pdf(tmp_path / "l.pdf", [(f"{n}", "Background") for n in (1, 2, 3)], title="Images")
    assert [b.text for b in extract(labels, labels.read_bytes()).blocks] == [f"{n}\nBackground" for n in (1, 2, 3)]


def test_pdf_table_lines_keep_their_columns_and_their_numbers(tmp_path: Path) -> None:
    """A table's lines are written as cells joined by " | ", each on its line; a list's dashes and two columns of
    prose side by side are no table."""
    path = make_table_pdf(tmp_path / "t.pdf")
    with_tables = extract(path, path.read_bytes()).blocks
    lines = "\n".join(b.text for b in with_tables).splitlines()
    assert lines[1:4] == [" | ".join(cells) for cells in TABLE_PDF_ROWS]
    assert sum(" | " in line for line in lines) == 3  # neither the list nor the prose columns
    from pypdf import PageObject

    plain = PageObject.extract_text  # the page's text without its tables' cells: the same lines, numbered alike
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(
            PageObject, "extract_text", lambda page, **kw: "" if kw.get("extraction_mode") else plain(page, **kw)
        )
        without = extract(path, path.read_bytes()).blocks
    assert [(b.line_start, b.line_end) for b in with_tables] == [(b.line_start, b.line_end) for b in without]
    assert "Power consumption - 4.0 W" in without[0].text


@pytest.mark.parametrize(
    "name,data,reason",
    [
        ("empty.txt", b"", "empty file"),
        ("bad.json", b'{"a": ', "invalid JSON at line 1"),
        ("latin1.txt", "caf\xe9".encode("latin-1"), "not valid UTF-8"),
        ("binary.txt", b"\x00\x01\x02\x03binary", "binary content"),
        ("fake.pdf", b"<html><body>not a pdf</body></html>", "not a PDF"),
        ("truncated.pdf", b"%PDF-1.4\n1 0 obj\n<<", "PDF"),
        ("blank.md", b"\n\n   \n", "no text"),
    ],
)
def test_bad_input_has_clear_reason(name: str, data: bytes, reason: str) -> None:
    with pytest.raises(ExtractionError, match=reason):
        extract(Path(name), data)


def test_deeply_nested_json_is_refused() -> None:
    data = ("[" * 200 + "1" + "]" * 200).encode()
    with pytest.raises(ExtractionError, match="nested deeper"):
        extract(Path("deep.json"), data)


@pytest.mark.parametrize(
    "data,reason",
    [
        (b'{"a": 1, "a": 2}', 'duplicate JSON key "a" at $.a: '),
        (b'[{"x": 1}, {"y": {"z": [0, {"k": 1, "k": 1}]}}]', 'duplicate JSON key "k" at $[1].y.z[1].k: '),
        (b'{"a b": {"\\"q\\"": 1, "\\"q\\"": 2}}', 'duplicate JSON key "\\"q\\"" at $["a b"]["\\"q\\""]: '),
        (
            b'{"a": {"b": 1, "b": 2}, "a": {"c": 1}, "d": [1, 1]}',
            'duplicate JSON key "a" at $.a: ',
        ),  # inner one dropped
        (
            b'{"k": 1, "k": 2, "k": 3, "m": {"n": 1, "n": 2}}',
            'duplicate JSON key "k" at $.k (and 1 more repeated key): ',
        ),
    ],
    ids=["top", "nested", "quoted", "dropped-with-its-parent", "counted"],
)
def test_json_duplicate_keys_are_refused_naming_key_and_path(data: bytes, reason: str) -> None:
    with pytest.raises(ExtractionError) as info:
        extract(Path("d.json"), data)
    assert str(info.value).startswith(reason), str(info.value)


def test_json_duplicate_key_reason_stays_short_for_huge_keys() -> None:
    doc = "1"
    for level in range(40):
        doc = f'{{"{level}{"x" * 100_000}": {doc}}}'
    doc = doc[:-1] + ', "' + "y" * 100_000 + '": 1, "' + "y" * 100_000 + '": 2}'
    with pytest.raises(ExtractionError) as info:
        extract(Path("d.json"), doc.encode())
    assert str(info.value).startswith('duplicate JSON key "yyy') and len(str(info.value)) < 1000


def test_utf16_text_with_bom_is_read() -> None:
    result = extract(Path("u.txt"), "héllo wörld".encode("utf-16"))
    assert result.blocks[0].text == "héllo wörld"


def test_html_list_items_keep_the_bullets_and_numbers_a_browser_draws(tmp_path: Path) -> None:
    """An ``<ol>``'s items are numbered as the page shows them (start, value, reversed, type), an item's ``<p>``
    included; a ``<ul>``'s are bullets."""
    page = tmp_path / "steps.html"
    page.write_text(
        "<html><body>"
        "<ol><li><p>Open the cover.</p></li><li><p>Pull the <b>latch</b>.</p></li></ol>"
        '<ol start="4"><li>Fourth.</li><li value="9">Ninth.</li><li>Tenth.</li></ol>'
        "<ol reversed><li>Three.</li><li>Two.</li><li>One.</li></ol>"
        '<ol type="a"><li>First letter.</li><li>Second letter.</li></ol>'
        '<ol type="I" start="4"><li>Roman four.</li></ol>'
        "<ul><li><p>A bullet.</p></li></ul>"
        "<ol><li><img src='x.png'></li></ol><p>After an empty item.</p>"
        "</body></html>"
    )
    texts = [b.text for b in extract(page, page.read_bytes()).blocks]
    assert texts == [
        "1. Open the cover.",
        "2. Pull the latch.",
        "4. Fourth.",
        "9. Ninth.",
        "10. Tenth.",
        "3. Three.",
        "2. Two.",
        "1. One.",
        "a. First letter.",
        "b. Second letter.",
        "IV. Roman four.",
        "- A bullet.",
        "After an empty item.",
    ]
