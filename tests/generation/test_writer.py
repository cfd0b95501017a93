"""The extractive writer: a spec's outline filled with verbatim quotes, each with its own footnote."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from generation.documents import SpecText
from generation.models import GenerationRun
from generation.pipeline import generation_run_create, generation_run_execute
from generation.writer import DEFAULT_OUTLINE, NOTHING_FOUND, precedence_notes, spec_outline
from sources.models import Chunk
from tests.conftest import ScriptedLLM

pytestmark = pytest.mark.django_db

SPEC = SpecText(
    "wiring-guide",
    1,
    "# Wiring guide\n\nThe manual takes precedence over the datasheet.\n\n"
    "## Power supply\n\n## Sensor bus\n\n## Volcano eruptions\n",
)


@pytest.fixture
def extractive(indexed: Path, foundry_config, scripted_llm: ScriptedLLM) -> ScriptedLLM:
    foundry_config(generation={"model": "extractive"})
    return scripted_llm


def run_document(tmp_path: Path, topic: str, spec: SpecText = SPEC) -> tuple[GenerationRun, str]:
    out = tmp_path / "doc.md"
    run = generation_run_create(topic=topic, spec=spec, output_path=str(out))
    generation_run_execute(run_id=run.pk)
    run = GenerationRun.objects.get(pk=run.pk)
    return run, out.read_text() if out.exists() else ""


def test_outline_is_the_specs_level_two_headings_or_the_default() -> None:
    assert spec_outline(SPEC.body) == ["Power supply", "Sensor bus", "Volcano eruptions"]
    assert spec_outline("# Title\n\n```\n## not a heading\n```\nText.") == list(DEFAULT_OUTLINE)
    assert precedence_notes(SPEC.body) == ["The manual takes precedence over the datasheet."]
    wrapped = "Intro.\nIf sources disagree, the manual takes precedence over the\ndatasheet. Be brief.\n\n- Specs win."
    assert precedence_notes(wrapped) == [  # a sentence the spec wraps is one note
        "If sources disagree, the manual takes precedence over the datasheet.",
        "Specs win.",
    ]


def test_document_quotes_each_section_verbatim_with_a_footnote_per_quote(
    extractive: ScriptedLLM, tmp_path: Path
) -> None:
    run, text = run_document(tmp_path, "AX-200 gateway installation")
    assert run.status == "succeeded" and run.llm_calls == 0 and not extractive.calls, run.error
    headings = re.findall(r"^## (.+)$", text, re.MULTILINE)
    assert headings[:3] == ["Power supply", "Sensor bus", "Volcano eruptions"] and headings[-1] == "Sources"
    notes = dict(re.findall(r"^\[\^(\d+)\]: (.+)$", text, re.MULTILINE))
    body = text.split("\n## Sources")[0]
    quotes = re.findall(r"([^\n\]]+?) \[\^(\d+)\]", body)
    assert len(quotes) >= 2 and {n for _, n in quotes} == set(notes)
    for quote, number in quotes:  # verbatim: in the chunk of the source at the lines its footnote names
        source, first, last = re.match(r"(\S+) .*lines? (\d+)(?:-(\d+))?$", notes[number]).groups()
        chunks = Chunk.objects.filter(source__path=source, line_start__lte=int(first), line_end__gte=int(last or first))
        assert any(" ".join(quote.split()) in " ".join(c.text.split()) for c in chunks), (quote, notes[number])
    assert run.sentences_kept == run.sentences_total == len(quotes) and run.coverage == 1.0


def test_a_section_the_sources_do_not_cover_says_so(extractive: ScriptedLLM, tmp_path: Path) -> None:
    _, text = run_document(tmp_path, "AX-200 gateway installation")
    volcano = text.split("## Volcano eruptions")[1].split("##")[0]
    assert NOTHING_FOUND in volcano and "[^" not in volcano


def test_no_section_above_the_threshold_fails_the_run(extractive: ScriptedLLM, tmp_path: Path, foundry_config) -> None:
    foundry_config(generation={"model": "extractive", "writer_min_score": 1.9})
    run, text = run_document(tmp_path, "AX-200 gateway installation")
    assert run.status == "failed" and text == "" and "close enough to quote" in run.error["message"]


def test_conflicts_come_first_with_the_specs_precedence_note(extractive: ScriptedLLM, tmp_path: Path) -> None:
    _, text = run_document(tmp_path, "internal logic supply voltage VCC")
    first = text.index("## Power supply")
    assert "Conflicts between the sources" in text[:first] and "VCC = 3.3 V" in text[:first]
    assert "Spec: The manual takes precedence over the datasheet." in text[:first]


def test_no_evidence_fails_the_run_and_writes_no_file(extractive: ScriptedLLM, tmp_path: Path) -> None:
    run, text = run_document(tmp_path, "the history of the football world cup in 1954")
    assert run.status == "failed" and text == "" and "No supporting documentation" in run.error["message"]


def test_quotes_are_never_repeated_across_sections(extractive: ScriptedLLM, tmp_path: Path) -> None:
    spec = SpecText("bus", 1, "# Bus\n\n## Sensor bus\n\n## RS-485 sensor bus wiring\n")
    _, text = run_document(tmp_path, "RS-485 sensor bus", spec)
    quotes = [q for q, _ in re.findall(r"([^\n\]]+?) \[\^(\d+)\]", text.split("\n## Sources")[0])]
    assert len(quotes) == len(set(quotes))
