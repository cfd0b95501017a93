"""Recency: the date a document gives itself, newer sources first among near-equal hits, conflicts that say which
side is newer."""

from __future__ import annotations

import io
import os
import re
import zipfile
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from generation.conflict_boxes import newest_side
from retrieval.fusion import ChunkFacts, Hit, recency_boost, revisions, similar_pairs, word_set
from retrieval.services.conflicts import date_note
from sources.services.extract import extract
from sources.services.extract.blocks import stated_date
from tests.conftest import make_pdf
from tests.sources.office_files import make_docx, make_pptx, make_xlsx

OLD, NEW = datetime(2023, 5, 2, tzinfo=UTC), datetime(2025, 3, 1, 8, 30, tzinfo=UTC)


SAME = frozenset("the logic supply is 3 3 v".split())
OTHER = frozenset("mount the pump on a level base".split())


def boost(hits: list[Hit], dated: dict, *, weight: float = 0.05, words: dict | None = None) -> list[int]:
    words = words if words is not None else {h.chunk_id: SAME for h in hits}
    source_of = {h.chunk_id: h.chunk_id for h in hits}  # each chunk of its own source
    return [h.chunk_id for h in recency_boost(hits, ChunkFacts(dated, source_of, words), weight=weight, overlap=0.8)]


def test_equal_dates_no_weight_or_no_revision_change_nothing() -> None:
    hits = [Hit(1, 0.030), Hit(2, 0.029), Hit(3, 0.020)]
    assert boost(hits, {1: 5.0, 2: 5.0, 3: 5.0}, weight=0.3) == [1, 2, 3]
    assert boost(hits, {1: 1.0, 2: 9.0, 3: 5.0}, weight=0.0) == [1, 2, 3]
    assert boost(hits, {}, weight=0.3) == [1, 2, 3]
    unrelated = {1: SAME, 2: OTHER, 3: frozenset({"else"})}  # no two are revisions of one text: dates do nothing
    assert boost(hits, {1: 1.0, 2: 9.0, 3: 5.0}, weight=1.0, words=unrelated) == [1, 2, 3]


def test_the_later_of_two_revisions_comes_first_and_a_clearly_better_one_keeps_its_place() -> None:
    hits = [Hit(1, 0.0300), Hit(2, 0.0295), Hit(3, 0.0150)]
    dated = {1: 100.0, 2: 200.0, 3: 300.0}  # 3 is the newest revision but half as relevant
    assert boost(hits, dated) == [2, 1, 3]
    source_of = {1: 1, 2: 2, 3: 3}
    words = {1: SAME, 2: SAME, 3: SAME}
    boosted = recency_boost(hits, ChunkFacts(dated, source_of, words), weight=0.05, overlap=0.8)
    assert [h.score for h in boosted] == [0.0295, 0.0300, 0.0150]  # each keeps its own score


def test_a_revision_moves_only_within_the_places_its_group_held() -> None:
    hits = [Hit(1, 0.030), Hit(2, 0.029), Hit(3, 0.028), Hit(4, 0.027)]
    words = {1: SAME, 2: OTHER, 3: frozenset({"else"}), 4: SAME}  # 1 and 4 are revisions of one text
    assert boost(hits, {1: 1.0, 2: 1.0, 3: 1.0, 4: 9.0}, weight=0.2, words=words) == [4, 2, 3, 1]
    assert boost(hits, {1: 1.0, 2: 1.0, 3: 1.0, 4: 9.0}, weight=0.05, words=words) == [1, 2, 3, 4]  # 10 % apart


def test_chunks_of_one_source_are_not_revisions_of_each_other() -> None:
    hits = [Hit(1, 0.030), Hit(2, 0.0299)]
    words = {1: SAME, 2: SAME}
    assert revisions(hits, ChunkFacts({}, {1: 7, 2: 7}, words), overlap=0.8) == []
    assert revisions(hits, ChunkFacts({}, {1: 7, 2: 8}, words), overlap=0.8) == [[1, 2]]
    near = {1: SAME, 2: SAME | {"rev"}}  # 7 of 8 words shared
    assert revisions(hits, ChunkFacts({}, {1: 7, 2: 8}, near), overlap=0.9) == []
    assert word_set("The Logic supply, the logic") == frozenset({"the", "logic", "supply"})


def test_near_identical_chunks_that_differ_in_a_word_the_question_asks_are_not_revisions() -> None:
    """Two products' datasheets from one template: a question naming one of them keeps them apart."""
    hits = [Hit(1, 0.030), Hit(2, 0.0299)]
    a, b = SAME | {"ax200"}, SAME | {"ax300"}  # 6 of 8 words shared
    facts = ChunkFacts({}, {1: 1, 2: 2}, {1: a, 2: b})
    assert revisions(hits, facts, overlap=0.7) == [[1, 2]]
    assert revisions(hits, facts, overlap=0.7, asked=word_set("What is the logic supply of the AX200?")) == []
    assert revisions(hits, facts, overlap=0.7, asked=word_set("What is the logic supply?")) == [[1, 2]]


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(st.integers(0, 40), st.frozensets(st.sampled_from("abcdefghij"), max_size=8), max_size=25),
    st.sampled_from([0.1, 0.3, 0.5, 0.7, 0.75, 0.8, 1.0]),
)
def test_prefix_filtering_finds_exactly_the_pairs_a_comparison_of_every_pair_finds(sets, threshold) -> None:
    every = {
        frozenset((a, b))
        for a in sets
        for b in sets
        if a < b and sets[a] and sets[b] and len(sets[a] & sets[b]) >= threshold * len(sets[a] | sets[b])
    }
    found = [frozenset(pair) for pair in similar_pairs(sets, threshold)]
    assert len(found) == len(set(found)) and set(found) == every


def test_similar_pairs_needs_a_threshold_above_zero() -> None:
    with pytest.raises(ValueError, match="above 0"):
        similar_pairs({1: SAME, 2: OTHER}, 0.0)


def test_an_undated_revision_counts_as_the_oldest() -> None:
    hits = [Hit(1, 0.030), Hit(2, 0.0299), Hit(3, 0.001)]
    assert boost(hits, {1: None, 2: 7.0, 3: 1.0}) == [2, 1, 3]


def test_metadata_dates_outside_1980_to_now_are_placeholders() -> None:
    assert stated_date(datetime(1601, 1, 1), None, datetime(2024, 1, 2)) == datetime(2024, 1, 2, tzinfo=UTC)
    assert stated_date(datetime(2999, 1, 1, tzinfo=UTC), "2024-01-01") is None


def test_office_files_are_dated_by_their_last_modification(tmp_path: Path) -> None:
    import docx
    import pptx

    path = make_docx(tmp_path / "pump.docx")
    document = docx.Document(str(path))
    document.core_properties.modified, document.core_properties.created = NEW.replace(tzinfo=None), OLD
    document.save(str(path))
    assert extract(path, path.read_bytes()).issued == NEW
    path = make_pptx(tmp_path / "review.pptx")
    deck = pptx.Presentation(str(path))
    deck.core_properties.modified = NEW.replace(tzinfo=None)
    deck.save(str(path))
    assert extract(path, path.read_bytes()).issued == NEW
    path = make_xlsx(tmp_path / "sheet.xlsx", rows=3)  # openpyxl stamps "modified" with the time it saves
    with zipfile.ZipFile(path) as archive:
        parts = {name: archive.read(name) for name in archive.namelist()}
    core = parts["docProps/core.xml"].decode()
    parts["docProps/core.xml"] = re.sub(r"(<dcterms:modified[^>]*>)[^<]*", r"\g<1>2025-03-01T08:30:00Z", core).encode()
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in parts.items():
            archive.writestr(name, data)
    assert extract(path, path.read_bytes()).issued == NEW


def test_a_pdf_is_dated_by_its_moddate_else_its_creationdate(tmp_path: Path) -> None:
    from pypdf import PdfWriter

    path = make_pdf(tmp_path / "sheet.pdf", [("Power", "The logic supply is 3.3 V.")])
    for info, expected in [({"/ModDate": "D:20250301083000Z", "/CreationDate": "D:20230502"}, NEW), ({}, None)]:
        writer = PdfWriter(clone_from=str(path))
        writer.metadata = info or None
        out = io.BytesIO()
        writer.write(out)
        issued = extract(path, out.getvalue()).issued
        assert issued == expected if expected else issued is None
    writer = PdfWriter(clone_from=str(path))
    writer.metadata = {"/ModDate": "yesterday", "/CreationDate": "D:20230502000000Z"}  # a date pypdf cannot read
    out = io.BytesIO()
    writer.write(out)
    assert extract(path, out.getvalue()).issued == datetime(2023, 5, 2, tzinfo=UTC)


def test_an_html_page_is_dated_by_its_meta_tags(tmp_path: Path) -> None:
    page = tmp_path / "notes.html"
    head = (
        '<meta name="dcterms.created" content="2023-05-02">'
        '<meta property="article:modified_time" content="2025-03-01T08:30:00+00:00">'
    )
    page.write_text(f"<html><head>{head}<title>Notes</title></head><body><p>The supply is 3.3 V.</p></body></html>")
    assert extract(page, page.read_bytes()).issued == NEW
    page.write_text('<html><head><meta name="date" content="soon"></head><body><p>Text.</p></body></html>')
    assert extract(page, page.read_bytes()).issued is None


def test_a_conflict_names_the_newer_side() -> None:
    sides = [{"dated": "2023-05-02"}, {"dated": "2025-03-01"}, {"dated": ""}]
    newest_side(sides)
    assert [s["newest"] for s in sides] == [False, True, False]
    same = [{"dated": "2025-03-01"}, {"dated": "2025-03-01"}]
    newest_side(same)
    assert not any(s["newest"] for s in same)
    assert date_note(sides[1], sides[0]) == ", dated 2025-03-01, newer"
    assert date_note(sides[0], sides[1]) == ", dated 2023-05-02"
    assert date_note({}, sides[1]) == ""


SHEET = "# AX Datasheet\n\n## Power\n\nThe internal logic supply is VCC = {vcc} V at up to 40 mA.\n"


@pytest.mark.django_db
@pytest.mark.parametrize("newer", ["sheet-a.md", "sheet-b.md"])
def test_a_later_revision_outranks_the_earlier_one_and_the_conflict_says_which_is_newer(
    kb: Path, foundry_config, newer: str
) -> None:
    """Two revisions of a datasheet as files with different modification times (no metadata date): the answer
    quotes the later one, whichever it is, and its conflict box names it newer."""
    from django.contrib.auth.models import AnonymousUser

    from generation.answers import answer_question
    from generation.conflict_boxes import conflict_boxes
    from sources.services.ingest_jobs import knowledge_base_ingest

    foundry_config(retrieval={"min_chunks": 1}, generation={"model": "extractive"})
    for name, vcc in [("sheet-a.md", "5"), ("sheet-b.md", "3.3")]:
        (kb / name).write_text(SHEET.format(vcc=vcc))
        when = NEW if name == newer else OLD
        os.utime(kb / name, (when.timestamp(), when.timestamp()))
    knowledge_base_ingest(target=kb)
    answer = answer_question(question="What is the internal logic supply VCC?")
    vcc = "5" if newer == "sheet-a.md" else "3.3"
    assert answer.citations[0]["source"] == newer and f"VCC = {vcc} V" in answer.answer
    [box] = conflict_boxes(answer.conflicts, AnonymousUser())
    newest = [s for s in box.sides if s["newest"]]
    assert [s["source"] for s in newest] == [newer] and newest[0]["dated"] == "2025-03-01"
