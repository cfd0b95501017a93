"""Answers from the extractive reader (generation.model: extractive): quotes, citations, thresholds, audit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.conf import settings

from foundry_site.cli.render import answer_format
from generation.answers import answer_question
from generation.models import QueryLog
from tests.conftest import ScriptedLLM
from tests.generation.conftest import MANUAL

pytestmark = pytest.mark.django_db

QUESTION = "How many sensors can be connected to the RS-485 bus?"


@pytest.fixture
def extractive(indexed: Path, foundry_config, scripted_llm: ScriptedLLM) -> ScriptedLLM:
    foundry_config(generation={"model": "extractive"})
    return scripted_llm


def test_answer_quotes_the_source_verbatim_with_the_units_own_lines(extractive: ScriptedLLM) -> None:
    answer = answer_question(question=QUESTION)
    assert answer.answer_class in ("normal", "low_confidence") and answer.llm_calls == 0
    assert not extractive.calls and answer.model == "extractive"
    assert "Up to 8 sensors can be connected to the RS-485 bus. [S" in answer.answer
    manual = [c for c in answer.citations if c["source"] == "manual.md"]
    assert manual and manual[0]["lines"][0] == manual[0]["lines"][1] == 10  # the sentence's own line
    lines = MANUAL.splitlines()
    for citation in answer.citations:  # every quoted line is in the source at the cited lines
        first, last = citation["lines"]
        if citation["source"] == "manual.md":
            assert "Up to 8 sensors" in "\n".join(lines[first - 1 : last])
    assert answer.coverage == 1.0 and answer.timings["read"] >= 0


def test_every_answer_sentence_is_a_quote_of_the_passage_it_cites(extractive: ScriptedLLM) -> None:
    answer = answer_question(question="What is the logic supply voltage VCC?")
    texts = {c["id"]: " ".join(c["text"].split()) for c in answer.citations}
    for line in answer.answer.splitlines():
        quote, label = line.rsplit(" [", 1)
        for part in quote.split(f" [{label[:-1]}] "):
            assert part in texts[label[:-1]]


def test_below_the_reader_threshold_is_a_refusal_naming_the_passages(extractive: ScriptedLLM, foundry_config) -> None:
    foundry_config(generation={"model": "extractive", "reader_min_score": 1.0, "reader_low_score": 1.0})
    answer = answer_question(question=QUESTION)
    assert answer.answer_class == "no_evidence" and answer.refusal == "reader" and answer.citations == []
    assert "none of their sentences answers the question" in answer.answer and "Passages found: S1" in answer.answer
    assert "threshold" not in answer.answer and f"{answer.grounding['best']:.3f}" not in answer.answer  # no scores
    row = QueryLog.objects.get(run_id=answer.run_id)
    assert row.refusal == "reader" and row.llm_calls == 0 and row.grounding["reader"] == "extractive"
    assert row.grounding["threshold"] == 1.0 and row.grounding["answerability"] < 1.0  # the scores are the audit's
    assert row.grounding["top_units"] and row.grounding["quoted"]


def test_a_follow_up_reads_reader_followup_passages(extractive: ScriptedLLM, foundry_config) -> None:
    foundry_config(
        generation={"model": "extractive", "reader_min_score": 1.0, "reader_low_score": 1.0}
        | {"reader_passages": 1, "reader_followup_passages": 2}
    )
    question = "What is the logic supply voltage VCC?"  # two passages pass the gate
    alone = answer_question(question=question)
    follow_up = answer_question(question=question, message="and the logic supply?")
    assert "Passages found: S1 datasheet.md" in alone.answer and "; S2" not in alone.answer
    assert "Passages found: S1 datasheet.md" in follow_up.answer and "; S2 manual.md" in follow_up.answer


def test_a_code_no_passage_names_is_a_refusal_naming_it(extractive: ScriptedLLM, foundry_config) -> None:
    foundry_config(generation={"model": "extractive", "reader_min_score": 0.0, "reader_low_score": 0.0})
    answer = answer_question(question="How many sensors can be connected to the RS-485 bus over LoRaWAN?")
    assert answer.refusal == "absent" and answer.citations == [] and "do not mention “LoRaWAN”" in answer.answer
    assert QueryLog.objects.get(run_id=answer.run_id).grounding["unmentioned"] == ["LoRaWAN"]
    # A follow-up is held to the names its asker typed, not to the terms carried over from earlier turns.
    asked = answer_question(question=f"{QUESTION} (LoRaWAN)", message=QUESTION)
    assert not asked.refusal and "Up to 8 sensors" in asked.answer


def test_between_the_thresholds_the_answer_is_low_confidence(extractive: ScriptedLLM, foundry_config) -> None:
    foundry_config(generation={"model": "extractive", "reader_min_score": 0.0, "reader_low_score": 1.0})
    answer = answer_question(question=QUESTION)
    assert answer.answer_class == "low_confidence" and answer.answer
    assert answer_format(answer).startswith("Answer (LOW CONFIDENCE")


def test_above_both_thresholds_the_answer_is_normal(extractive: ScriptedLLM, foundry_config) -> None:
    foundry_config(
        generation={"model": "extractive", "reader_min_score": 0.0, "reader_low_score": 0.0},
        retrieval={"min_chunks": 1},
    )
    foundry_config(generation={"low_confidence_score": 0.0})
    assert answer_question(question=QUESTION).answer_class == "normal"


def test_gate_refusal_is_unchanged(extractive: ScriptedLLM) -> None:
    answer = answer_question(question="Who won the football world cup final in 1954?")
    assert answer.refusal == "gate" and answer.llm_calls == 0


def test_audit_artifact_and_cache_behave_as_for_an_llm_answer(extractive: ScriptedLLM) -> None:
    first = answer_question(question=QUESTION)
    again = answer_question(question=QUESTION)
    assert again.cached and again.answer == first.answer and again.citations == first.citations
    artifact = next((Path(settings.FOUNDRY_ARTIFACTS)).rglob("retrieval.json"))
    assert json.loads(artifact.read_text())["grounding"]["reader"] == "extractive"
    assert QueryLog.objects.filter(question=QUESTION).count() == 2
