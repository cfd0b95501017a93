"""Splitting passages into the units the extractive reader quotes."""

from __future__ import annotations

import pytest

from core.units import item_sentences, paragraph_lead, passage_units, sentence_ends


def texts(text: str) -> list[str]:
    return [u.text for u in passage_units(text)]


def test_every_unit_is_a_verbatim_slice_with_its_lines() -> None:
    text = (
        "The gateway polls up to 8 sensors.\nIt stores readings\nin a buffer.\n\n"
        "- Item one\n- Item two\n  continues here\n\n| Key | Value |\n|---|---|\n| VCC | 3.3 V |\n"
    )
    units = passage_units(text)
    assert all(text[u.start : u.end] == u.text for u in units)
    assert [(u.kind, u.line_first, u.line_last) for u in units] == [
        ("sentence", 0, 0),
        ("sentence", 1, 2),
        ("item", 4, 4),
        ("item", 5, 6),
        ("row", 10, 10),
    ]
    assert units[3].text == "- Item two\n  continues here"


def test_table_rows_carry_their_header_for_scoring_but_quote_only_the_row() -> None:
    units = passage_units("| Parameter | Value |\n| --- | --- |\n| Supply | 24 V |\n| Current | 1 A |")
    assert [u.text for u in units] == ["| Supply | 24 V |", "| Current | 1 A |"]
    assert units[0].context == "| Parameter | Value |"
    assert units[0].scored_text == "| Parameter | Value |\n| Supply | 24 V |"


@pytest.mark.parametrize(
    "text,expected",
    [
        (
            "The logic supply is 3.3 V. The main input is 24 V.",
            ["The logic supply is 3.3 V.", "The main input is 24 V."],
        ),
        ("Firmware 2.4.1 fixes it. Install 2.2.0 first.", ["Firmware 2.4.1 fixes it.", "Install 2.2.0 first."]),
        (
            "Use a DIN rail, e.g. EN 60715 rails. Then wire it.",
            ["Use a DIN rail, e.g. EN 60715 rails.", "Then wire it."],
        ),
        ("See Section 3. Wiring rules apply there.", ["See Section 3. Wiring rules apply there."]),
        ("Consumption is approx. 2 W at most. Done.", ["Consumption is approx. 2 W at most.", "Done."]),
        ("The interval ranges up to 3600 s. New: TLS.", ["The interval ranges up to 3600 s.", "New: TLS."]),
        ("Written by J. Smith in 2024. Revised later.", ["Written by J. Smith in 2024.", "Revised later."]),
        ("Is it isolated? Yes! It is.", ["Is it isolated?", "Yes!", "It is."]),
    ],
)
def test_sentences_split_on_ends_not_on_abbreviations_numbers_or_references(text: str, expected: list[str]) -> None:
    assert texts(text) == expected


def test_sentences_after_a_bold_run_in_heading_are_read_under_it() -> None:
    text = "**E05 – Image rejected.** The file is damaged. Download it again.\n\nPlain text. More of it."
    units = passage_units(text)
    assert [u.text for u in units][:2] == ["**E05 – Image rejected.** The file is damaged.", "Download it again."]
    assert [u.context for u in units] == ["", "E05 – Image rejected.", "", ""]
    assert units[1].scored_text == "E05 – Image rejected.\nDownload it again."


def test_a_short_line_without_punctuation_is_its_own_unit_not_wrapped_prose() -> None:
    text = "Version 2.4.1 - released 2026-06-09\nMaintenance release. Fixed: a bug."
    assert texts(text) == ["Version 2.4.1 - released 2026-06-09", "Maintenance release.", "Fixed: a bug."]


def test_a_label_line_opening_a_paragraph_leads_the_units_below_it() -> None:
    text = (
        "Version 2.4.1 - released 2026-06-09\nMaintenance release. Fixed: a bug.\n\n"
        "Fixed in this version. Fixed: another bug.\n\n"
        "Every line of sixty characters or more is taken as prose that wraps\nonto the next. Use twisted pairs.\n\n"
        "## Updates\nInstall the image."
    )
    lead = {u.text: paragraph_lead(text, u) for u in passage_units(text)}
    assert lead["Maintenance release."] == lead["Fixed: a bug."] == 0
    assert lead["Version 2.4.1 - released 2026-06-09"] is None  # the label itself
    assert lead["Fixed: another bug."] is None  # the paragraph opens with a sentence
    assert lead["Use twisted pairs."] is None  # a long first line is wrapped prose
    assert lead["Install the image."] is None  # a heading is the passage's, not the paragraph's


def test_a_pdf_table_row_ending_in_an_empty_cell_is_its_own_unit_and_its_header_one_line() -> None:
    """A PDF's table comes out as lines: "Typ." in the header is no sentence end, and a row whose last cell is
    empty ("- -") does not run on into the next row, as a word cut at a hyphen ("self-") does."""
    text = (
        "Parameter Min. Typ. Max. Unit\n"
        "Reverse polarity protection - yes - -\n"
        "Undervoltage warning (E03) 10.8 - 26.4 V DC\n"
        "Input fuse (self-\nresetting PTC) - 1 - A"
    )
    assert texts(text) == [
        "Parameter Min. Typ. Max. Unit",
        "Reverse polarity protection - yes - -",
        "Undervoltage warning (E03) 10.8 - 26.4 V DC",
        "Input fuse (self-\nresetting PTC) - 1 - A",
    ]


def test_rows_of_cells_are_read_under_their_header_row_across_blank_lines() -> None:
    """A table of a PDF, a Word file or a sheet is written as cells joined by " | ": its header row (over its first
    row) is no unit but every row's context, also where each row is a block of its own, a blank line apart."""
    text = (
        "The supply is protected.\n"
        "Parameter | Min. | Max. | Unit\n"
        "Main input voltage | 10.8 | 26.4 | V DC\n\n"
        "Power consumption | - | 4.0 | W\n"
        "Fitted on a rail.\n"
        "Orphan | row"
    )
    units = passage_units(text)
    assert [(u.kind, u.text, u.context) for u in units] == [
        ("sentence", "The supply is protected.", ""),
        ("row", "Main input voltage | 10.8 | 26.4 | V DC", "Parameter | Min. | Max. | Unit"),
        ("row", "Power consumption | - | 4.0 | W", "Parameter | Min. | Max. | Unit"),
        ("sentence", "Fitted on a rail.", ""),
        ("row", "Orphan | row", ""),  # after prose, a lone row has no header
    ]
    assert [u.line_first for u in units] == [0, 2, 4, 5, 6]
    inside = passage_units("MQTT client | port 1883, or 8883 with TLS\nTime sync | NTP, two servers")
    assert [(u.kind, u.context) for u in inside] == [("row", ""), ("row", "")]  # a passage opening inside a table
    field = passage_units("note: a | b\nnext: c | d")  # a labelled value holding " | " stays a value
    assert [u.kind for u in field] == ["field", "field"]


def test_headings_and_table_rules_are_not_units() -> None:
    assert texts("## Power\n\nThe input is 24 V.\n\n|---|---|") == ["The input is 24 V."]


def test_a_long_list_item_is_quoted_sentence_by_sentence() -> None:
    item = "- " + " ".join(f"Sentence number {i} says something about the wiring." for i in range(12))
    units = passage_units(item)
    assert len(units) == 12 and all(u.kind == "item" for u in units)
    assert units[0].text.startswith("- Sentence number 0")


def test_an_item_of_several_sentences_is_also_read_by_them() -> None:
    text = (
        "- The bus is 1,000 m at 9600 baud. At higher rates it is shorter.\n- Stubs are short.\n2. Click **Install**."
    )
    first, short, numbered = passage_units(text)
    assert item_sentences(first) == ["The bus is 1,000 m at 9600 baud.", "At higher rates it is shorter."]
    assert item_sentences(short) == [] and item_sentences(numbered) == []
    assert item_sentences(passage_units("One sentence. Another one.")[0]) == []  # not an item


def test_numbered_and_lettered_list_items() -> None:
    assert texts("1. Hook the housing.\n2) Press it.\na. Check it.") == [
        "1. Hook the housing.",
        "2) Press it.",
        "a. Check it.",
    ]


def test_sentence_end_rule() -> None:
    assert sentence_ends("It is 5 V.") and sentence_ends("Really?") and not sentence_ends("see Fig.")
    assert not sentence_ends("the U.S.") and sentence_ends("after 5 min.")


def test_empty_and_blank_text_has_no_units() -> None:
    assert passage_units("") == [] and passage_units("\n \n") == []


def test_labelled_values_are_units_of_their_own() -> None:
    text = (
        "interfaces[0].name: RS-485 sensor bus\ninterfaces[0].max_bus_length_m_at_9600_baud: 1000\n"
        "product: Aurora AX-200\nFixed: the alarm bug. It works."
    )
    units = passage_units(text)
    assert [(u.kind, u.text) for u in units] == [
        ("field", "interfaces[0].name: RS-485 sensor bus"),
        ("field", "interfaces[0].max_bus_length_m_at_9600_baud: 1000"),
        ("field", "product: Aurora AX-200"),
        ("sentence", "Fixed: the alarm bug."),
        ("sentence", "It works."),
    ]
    # a record's value is read with the record's name (never the name's own line, nor a value outside it)
    assert units[1].scored_text == "interfaces 0 max bus length m at 9600 baud: 1000 (RS-485 sensor bus)"
    assert units[0].scored_text == "interfaces 0 name: RS-485 sensor bus"
    assert units[2].scored_text == "product: Aurora AX-200"


def test_the_ends_of_a_range_are_one_labelled_value() -> None:
    text = (
        "environmental.storage_temperature_c.min: -40\nenvironmental.storage_temperature_c.max: 85\n"
        "environmental.humidity_percent: 95\ninterfaces[0].modbus_address_range.min: 1\n"
        "interfaces[0].modbus_address_range.max: 247\ninterfaces[0].name: RS-485 sensor bus\nlimits.min: 3"
    )
    units = passage_units(text)
    assert [(u.text, u.line_first, u.line_last) for u in units] == [
        ("environmental.storage_temperature_c.min: -40\nenvironmental.storage_temperature_c.max: 85", 0, 1),
        ("environmental.humidity_percent: 95", 2, 2),
        ("interfaces[0].modbus_address_range.min: 1\ninterfaces[0].modbus_address_range.max: 247", 3, 4),
        ("interfaces[0].name: RS-485 sensor bus", 5, 5),
        ("limits.min: 3", 6, 6),  # another range's end on the next line is not this one's
    ]
    assert all(u.kind == "field" for u in units)
    # read as the range's key path with both ends, and with the name of the record it stands in
    assert units[0].scored_text == "environmental storage temperature c: min: -40, max: 85"
    assert units[2].scored_text == "interfaces 0 modbus address range: min: 1, max: 247 (RS-485 sensor bus)"
    wrapped = passage_units("limits.note: read the manual\n  before wiring")[0]  # a value going on below its line
    assert wrapped.kind == "field" and wrapped.scored_text == "limits note: read the manual\n  before wiring"


def test_a_value_of_a_record_is_read_with_the_name_of_its_record() -> None:
    text = (
        "interfaces[1].protocols[4].name: NTP client\ninterfaces[1].protocols[4].port: 123\n"
        "interfaces[1].defaults.ip_address: 192.168.10.50\ninterfaces[1].protocols[5].port: 9999\n"
        "interfaces[1].name: Ethernet"
    )
    names = {u.text: u.context for u in passage_units(text)}
    assert names == {
        "interfaces[1].protocols[4].name: NTP client": "",
        "interfaces[1].protocols[4].port: 123": "NTP client",
        "interfaces[1].defaults.ip_address: 192.168.10.50": "Ethernet",  # the innermost record it stands in
        "interfaces[1].protocols[5].port: 9999": "",  # a record whose name the text does not hold
        "interfaces[1].name: Ethernet": "",
    }
