from __future__ import annotations

from foundry_site.cli.render import conflict_format
from retrieval.services.conflicts import (
    ANSWER_HINT,
    Passage,
    conflicts_by_llm,
    conflicts_by_rule,
    conflicts_concerning,
    statements,
)
from tests.conftest import ScriptedLLM


def p(label: str, source: str, text: str) -> Passage:
    return Passage(label, source, "§ 4.2", text)


def test_seed_vcc_example_is_a_conflict() -> None:
    found = conflicts_by_rule(
        [
            p("S1", "datasheet-v1.pdf", "Supply: VCC = 3.3V for the core."),
            p("S2", "datasheet-v2.pdf", "The logic supply is VCC = 5V."),
        ]
    )
    assert len(found) == 1
    text = conflict_format(found[0].as_dict())
    assert text.startswith("⚠ Conflict detected:")
    assert 'Source A (datasheet-v1.pdf § 4.2): "VCC = 3.3V"' in text
    assert 'Source B (datasheet-v2.pdf § 4.2): "VCC = 5V"' in text
    assert text.endswith("Check the source hierarchy in your feature spec.")  # of a document
    assert conflict_format(found[0].as_dict(), hint=ANSWER_HINT).endswith(ANSWER_HINT)  # of an answer


def test_lookalikes_are_not_conflicts() -> None:
    passages = [
        p("S1", "a.pdf", "VCC = 3.3 V. VDD = 1.8 V."),
        p("S2", "b.pdf", "VCC = 3300 mV."),  # same value, other unit
        p("S3", "c.md", "VDD: 1.8V"),  # same value, other formatting
        p("S4", "d.md", "The supply is 12 V and the sensor is 5 V."),  # no named quantity
        p("S5", "a.pdf", "VCC = 5 V in sleep mode"),  # same source disagreeing with itself: a table, not a conflict
        p("S6", "e.md", "VCC = 3.3 mA"),  # other dimension
    ]
    assert conflicts_by_rule(passages) == []


def test_statement_units_normalise() -> None:
    assert [(s.quantity, s.value, s.dimension) for s in statements("VCC = 3300 mV and I_MAX: 2 A")] == [
        ("VCC", 3.3, "V"),
        ("I_MAX", 2.0, "A"),
    ]


def test_llm_conflicts_need_real_quotes(scripted_llm: ScriptedLLM) -> None:
    scripted_llm.reply = lambda m: (
        'S1 | "limit is 8 sensors" | S2 | "limit is 16 sensors"\nS1 | "made up quote" | S2 | "limit is 16 sensors"'
    )
    found = conflicts_by_llm(
        [p("S1", "a.md", "The bus limit is 8 sensors."), p("S2", "b.md", "The bus limit is 16 sensors.")],
        model="scripted/x",
    )
    assert len(found) == 1 and found[0].a["quote"] == "limit is 8 sensors" and found[0].detector == "llm"


def test_an_answer_shows_only_the_conflicts_about_it() -> None:
    vcc = conflicts_by_rule(
        [
            p("S1", "manual.md", "The internal logic supply is VCC = 3.3 V. The gateway weighs 210 g."),
            p("S2", "datasheet.pdf", "Logic supply VCC = 5 V"),
        ]
    )[0].as_dict()
    llm_found = {**vcc, "quantity": "", "detector": "llm"}

    def shown(question: str, answer: str, *cited: str) -> bool:
        return conflicts_concerning([vcc], question=question, answer=answer, cited=set(cited)) == [vcc]

    assert shown("What is VCC?", "No sentence of the passages found answers this closely enough to quote.")
    assert shown("what's the logic voltage?", "The internal logic supply is VCC = 3.3 V. [S1]", "S1")
    assert shown("What is the internal logic supply?", "Logic supply VCC = 5 V [S2]", "S2")
    # The same passage answers another question: its VCC statement is not what the answer says.
    assert not shown("How much does the gateway weigh?", "The gateway weighs 210 g. [S1]", "S1")
    assert not shown("Is the vccb pin 5 V tolerant?", "Refused.")  # "VCC" only inside another word
    # A conflict the LLM found names no quantity: shown when the answer cites either side's passage.
    assert conflicts_concerning([llm_found], question="weight?", answer="210 g [S1]", cited={"S1"}) == [llm_found]
    assert conflicts_concerning([llm_found], question="weight?", answer="210 g [S3]", cited={"S3"}) == []


def test_a_side_knows_its_chunk_and_the_lines_of_its_quote() -> None:
    from retrieval.services.conflicts import Passage, conflicts_by_rule

    a = Passage("S1", "manual.md", "", "Intro line.\nThe logic supply is\nVCC = 3.3 V here.", chunk_id=7, line_start=10)
    b = Passage("S2", "datasheet.md", "", "VCC = 5 V", chunk_id=9, line_start=4)
    (conflict,) = conflicts_by_rule([a, b])
    assert conflict.a["chunk_id"] == 7 and conflict.a["lines"] == [12, 12]
    assert conflict.b["chunk_id"] == 9 and conflict.b["lines"] == [4, 4]
