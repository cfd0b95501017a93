from __future__ import annotations

import pytest

from core.grounding import REFUSAL
from generation.grounded_markdown import ground_markdown


BUS = {
    "S1": "The RS-485 bus (X2: A, B, COM) connects up to 8 sensors.",
    "S2": "The bus must be terminated with 120 Ohm at both ends.",
}


def test_a_repeated_line_is_kept_and_counted_once() -> None:
    # A real run wrote this line eight times and reported 8 of 25 kept: all eight were the same line.
    text = "# Sensor bus\n\n" + "RS-485 bus (X2: A, B, COM) [S1]\n" * 8 + "\n- The moon is made of cheese [S2].\n"
    grounded = ground_markdown(text, BUS)
    assert grounded.text == "# Sensor bus\n\nRS-485 bus (X2: A, B, COM) [S1]"
    # As in answers, a repeat is not a sentence written: 2 written (the line once, the moon), 1 kept.
    assert (grounded.supported, grounded.total, grounded.coverage) == (1, 2, 0.5)
    assert [(s.text, s.supported_by) for s in grounded.sentences] == [
        ("RS-485 bus (X2: A, B, COM)", "S1"),
        ("The moon is made of cheese.", ""),
    ]


def test_a_repeat_inside_a_line_in_a_list_and_in_a_table_counts_once() -> None:
    text = (
        "The bus must be terminated with 120 Ohm at both ends [S2]. the bus must be terminated with 120 Ohm "
        "at both ends [S2].\n\n- The bus must be terminated with 120 Ohm at both ends [S2].\n\n"
        "| Bus | Termination |\n|---|---|\n| Bus termination | 120 Ohm at both ends [S2] |\n"
        "| Bus termination | 120 Ohm at both ends [S2] |\n"
    )
    grounded = ground_markdown(text, BUS)
    assert grounded.text.count("terminated with 120 Ohm") == 1 and grounded.text.count("| Bus termination |") == 1
    assert (grounded.supported, grounded.total) == (2, 2)


def test_html_tags_the_model_writes_do_not_reach_the_document() -> None:
    text = (
        "# Sensor bus\n\n<p>The bus must be terminated with 120 Ohm at both ends [S2].\n"
        "<p>The bus must be terminated with 120 Ohm at both ends [S2].</p>\n"
        "<div>RS-485 bus<br>(X2: A, B, COM) [S1]</div>\n"
        "<script>alert(1)</script> <STYLE type='text/css'>p { color: red }</style>\n"
    )
    grounded = ground_markdown(text, BUS)  # a script's or style's content is not a sentence written either
    assert grounded.text == (
        "# Sensor bus\n\nThe bus must be terminated with 120 Ohm at both ends. [S2]\nRS-485 bus (X2: A, B, COM) [S1]"
    )
    assert (grounded.supported, grounded.total) == (2, 2)


@pytest.mark.parametrize(
    "line",
    [
        "<<wiring the RS-485 sensor bus>> [S1]",
        "Feature release: [S1]",
        "- RS-485 bus: [S1]",
        "<p><<topic>></p>",
        "It is. [S1]",  # stop words only
        "| <<value>> | [S1] |",
    ],
)
def test_a_fragment_that_states_nothing_is_neither_kept_nor_counted(line: str) -> None:
    table = "| Bus | Wiring |\n|---|---|\n" if line.startswith("|") else ""
    text = f"# Sensor bus\n\n{table}{line}\n\nRS-485 bus (X2: A, B, COM) [S1]\n"
    grounded = ground_markdown(text, BUS)
    assert grounded.text.endswith("\nRS-485 bus (X2: A, B, COM) [S1]") and "<" not in grounded.text
    assert "Feature" not in grounded.text and "bus:" not in grounded.text and "It is" not in grounded.text
    assert (grounded.supported, grounded.total) == (1, 1) and len(grounded.sentences) == 1


def test_headings_stay_and_a_heading_that_was_only_markup_goes() -> None:
    text = "# Sensor bus\n\n## <<Section title>>\n\n## Wiring <b>notes</b>\n\nRS-485 bus (X2: A, B, COM) [S1]\n"
    grounded = ground_markdown(text, BUS)
    assert grounded.text == "# Sensor bus\n\n## Wiring notes\n\nRS-485 bus (X2: A, B, COM) [S1]"
    assert grounded.total == 1


def test_a_refusal_line_is_not_written_into_the_document() -> None:
    text = f"# Sensor bus\n\n{REFUSAL}\n\nRS-485 bus (X2: A, B, COM) [S1]\n"
    grounded = ground_markdown(text, BUS)
    assert REFUSAL not in grounded.text and (grounded.supported, grounded.total) == (1, 1)


def test_what_still_opens_html_after_the_tags_go_is_escaped() -> None:
    text = "# Sensor bus\n\n## <!DOCTYPE html> <?xml version?> Wiring <div\n\nRS-485 bus (X2: A, B, COM) [S1]\n"
    grounded = ground_markdown(text, BUS)
    assert grounded.text.startswith("# Sensor bus\n\n## Wiring &lt;div\n")
