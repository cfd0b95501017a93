"""An answer's labels run S1…Sn in reading order, with no gaps; the audit keeps the retrieval's labels."""

from __future__ import annotations

from pathlib import Path

import pytest

from generation.answers import answer_question
from generation.answers.answer import Answer
from generation.answers.labels import Relabel, answer_relabel, streamed
from tests.conftest import ScriptedLLM

pytestmark = pytest.mark.django_db


def test_labels_are_numbered_by_first_appearance() -> None:
    relabel = Relabel()
    assert relabel.text("A [S3]. B [S10][S3]. C [S11].") == "A [S1]. B [S2][S1]. C [S3]."
    listed = "Nothing to quote. Passages found: S2 a.md, lines 1-2; S7 b.md, § S4 wiring, lines 3-4."
    assert (
        Relabel().text(listed)
        == "Nothing to quote. Passages found: S1 a.md, lines 1-2; S2 b.md, § S4 wiring, lines 3-4."
    )


def test_streamed_pieces_get_the_labels_of_the_whole() -> None:
    sent: list[str] = []
    send, _ = streamed(sent.append)
    assert send is not None
    for piece in ("Up to 8 [S4]. ", "At 120 Ohm [S2][S4]."):
        send(piece)
    assert "".join(sent) == Relabel().text("Up to 8 [S4]. At 120 Ohm [S2][S4].") == "Up to 8 [S1]. At 120 Ohm [S2][S1]."


def test_citations_and_conflicts_follow_the_text() -> None:
    answer = Answer(
        run_id="r",
        question="q",
        answer_class="normal",
        answer="VCC is 5 V [S3].",
        citations=[{"id": "S3"}],
        conflicts=[{"a": {"label": "S1"}, "b": {"label": "S3"}}],
    )
    answer_relabel(answer)
    assert answer.answer == "VCC is 5 V [S1]." and answer.citations == [{"id": "S1"}]
    assert answer.conflicts == [{"a": {"label": "S2"}, "b": {"label": "S1"}}]
    assert answer.grounding["labels"] == {"S1": "S3", "S2": "S1"}


def test_an_answer_citing_a_later_passage_calls_it_s1(indexed: Path, scripted_llm: ScriptedLLM) -> None:
    seen: list[str] = []

    def reply(messages: list[dict]) -> str:
        context = messages[0]["content"]
        labels = [line.split("]")[0][1:] for line in context.splitlines() if line.startswith("[S")]
        seen.extend(labels)
        bus = next(
            line.split("]")[0][1:] for line in context.splitlines() if line.startswith("[S") and "datasheet.md" in line
        )
        return f"The internal logic supply is VCC = 5 V [{bus}]."

    scripted_llm.reply = reply
    answer = answer_question(question="How many sensors can the RS-485 bus take?  And the logic supply VCC?")
    assert answer.answer.endswith("[S1]") and [c["id"] for c in answer.citations] == ["S1"], answer.answer
    assert answer.citations[0]["source"] == "datasheet.md"
    assert answer.grounding["labels"]["S1"] in seen and answer.grounding["labels"]["S1"] != "S1"  # was a later one
