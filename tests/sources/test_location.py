"""Where a chunk sits, as citations print it: a chunk that crosses a page names both pages."""

from __future__ import annotations

import pytest
from django.test import Client

from sources.models import Chunk, Source, place_text
from tests.conftest import World, login, record_query


@pytest.mark.parametrize(
    ("pages", "lines", "expected"),
    [
        ((1, 2), (26, 4), "p. 1, line 26 – p. 2, line 4"),
        ((3, 3), (4, 15), "p. 3, lines 4-15"),
        ((3, None), (4, 15), "p. 3, lines 4-15"),
        ((None, None), (4, 15), "lines 4-15"),
        ((None, None), (52, 52), "line 52"),
        ((3, 3), (4, 4), "p. 3, line 4"),
    ],
)
def test_place_text(pages: tuple, lines: tuple, expected: str) -> None:
    assert place_text(*pages, *lines) == expected


@pytest.mark.parametrize(
    ("title", "heading", "expected"),
    [
        ("AX-200 Manual", "AX-200 Manual > Mounting", "AX-200 Manual > Mounting"),  # a Markdown H1 is the title
        ("AX-200 Datasheet", "2 Electrical > 2.1 Power", "AX-200 Datasheet > 2 Electrical > 2.1 Power"),
        ("AX-200 Datasheet", "", "AX-200 Datasheet"),
        ("", "", "notes.txt"),
    ],
)
def test_a_chunk_is_read_under_its_title_and_heading_path(title: str, heading: str, expected: str) -> None:
    assert Chunk(source=Source(name="notes.txt", title=title), heading=heading).under == expected


def test_chunk_location_keeps_the_section() -> None:
    chunk = Chunk(heading="Wiring", page_start=1, page_end=2, line_start=26, line_end=4)
    assert chunk.location == "§ Wiring, p. 1, line 26 – p. 2, line 4"
    assert place_text(3, 4, 2, 1, "pptx") == "slide 3, line 2 – slide 4, line 1"


def crossing(source: Source, **fields: str) -> Chunk:
    """A chunk from line 26 of page 1 to line 4 of page 2."""
    return Chunk.objects.create(
        source=source, ordinal=9, page_start=1, page_end=2, line_start=26, line_end=4, token_count=4, **fields
    )


@pytest.mark.django_db
def test_viewer_and_answer_sources_print_both_pages(world: World) -> None:
    chunk = crossing(world.sources["alpha"], text="Across the page break.")
    client: Client = login(world.users["alice"])
    viewer = client.get(f"/sources/{chunk.source_id}/?chunk={chunk.pk}").content.decode()
    assert "p. 1, line 26 – p. 2, line 4" in viewer and "lines 26-1" not in viewer
    row = record_query(
        world.users["alice"],
        answer="Across the page break. [S1]",
        citations=[
            {
                "id": "S1",
                "chunk_id": chunk.pk,
                "source": "alpha.md",
                "title": "alpha.md",
                "heading": "",
                "page": 1,
                "lines": [26, 4],
                "score": 0.9,
            }
        ],
    )
    answer = client.get(f"/ask/{row.pk}/").content.decode()
    assert "p. 1, line 26 – p. 2, line 4" in answer and "p. 1 ·" not in answer


@pytest.mark.parametrize(
    ("kind", "heading", "pages", "lines", "ocr", "expected", "footnote"),
    [
        ("pptx", "Agenda", (3, 3), (2, 4), None, "§ Agenda, slide 3, lines 2-4", "f §Agenda, slide 3, lines 2-4"),
        ("xlsx", "Pumps", (None, None), (20, 45), None, "sheet Pumps, rows 20-45", "f, sheet Pumps, rows 20-45"),
        ("csv", "", (None, None), (20, 45), None, "rows 20-45", "f, rows 20-45"),
        (
            "docx",
            "Install > Safety",
            (None, None),
            (12, 15),
            None,
            "§ Install > Safety, paragraphs 12-15",
            "f §Safety, paragraphs 12-15",
        ),
        (
            "image",
            "",
            (None, None),
            (1, 4),
            91.4,
            "lines 1-4, OCR, confidence 91 %",
            "f, lines 1-4, OCR, confidence 91 %",
        ),
        (
            "pdf",
            "2 Power",
            (7, 7),
            (4, 15),
            88.0,
            "§ 2 Power, p. 7, lines 4-15, OCR, confidence 88 %",
            "f §2 Power, p. 7, lines 4-15, OCR, confidence 88 %",
        ),
        (
            "json",
            "interfaces > [0]",
            (None, None),
            (37, 47),
            None,
            "§ interfaces > [0], lines 37-47",
            "f §interfaces[0], lines 37-47",
        ),
    ],
)
def test_each_kind_writes_its_own_location(
    kind: str, heading: str, pages: tuple, lines: tuple, ocr: float | None, expected: str, footnote: str
) -> None:
    from generation.footnotes import footnote_format
    from sources.models import citation_location, location_text

    assert (
        location_text(
            kind=kind,
            heading=heading,
            page_start=pages[0],
            page_end=pages[1],
            line_start=lines[0],
            line_end=lines[1],
            ocr_confidence=ocr,
        )
        == expected
    )
    recorded_before = {"heading": heading, "page": pages[0], "lines": list(lines)}  # no kind, no location
    assert (
        citation_location(
            {**recorded_before, "kind": kind, "page_end": pages[1], "ocr_confidence": ocr, "location": expected}
        )
        == expected
    )
    assert citation_location(recorded_before) == location_text(
        kind="", heading=heading, page_start=pages[0], page_end=None, line_start=lines[0], line_end=lines[1]
    )
    assert (
        footnote_format(
            name="f",
            kind=kind,
            heading=heading,
            page_start=pages[0],
            page_end=pages[1],
            lines=lines,
            ocr_confidence=ocr,
        )
        == footnote
    )


@pytest.mark.django_db
def test_passages_found_in_a_refusal_link_to_slides_and_sheet_rows(world: World) -> None:
    source = world.sources["alpha"]
    source.kind = "xlsx"
    source.save()
    rows = Chunk.objects.create(
        source=source, ordinal=7, text="P-7 | 40", heading="Pumps", line_start=20, line_end=45, token_count=4
    )
    answer = (
        f"No answer could be verified. Passages found: S1 alpha.md, {rows.location}; "
        "S2 alpha.md, sheet Pumps, rows 1-2."
    )
    row = record_query(
        world.users["alice"],
        answer_class="no_evidence",
        refusal="grounding",
        answer=answer,
        channels={"bm25": [[rows.pk, 1.0]]},
    )
    page = login(world.users["alice"]).get(f"/ask/{row.pk}/").content.decode()
    assert "S1 alpha.md, sheet Pumps, rows 20-45" in page
    assert f'href="/sources/{source.pk}/?chunk={rows.pk}#chunk-{rows.pk}"' in page
    assert "S2 alpha.md, sheet Pumps, rows 1-2 <span" in page  # no such chunk retrieved: named, not linked


def assert_linked(
    world: World, chunk: Chunk, listed: tuple[str, ...], notes: tuple[str, ...], lines: str | None = None
) -> None:
    """A refusal listing ``chunk`` as each of ``listed``, and a footnote naming it as each of ``notes``, link to it;
    the footnote with its ``lines`` marked (none across a page break)."""
    from generation.present import footnote_links

    source, alice = chunk.source, world.users["alice"]
    for place in listed:
        row = record_query(
            alice,
            answer_class="no_evidence",
            refusal="grounding",
            answer=f"No answer could be verified. Passages found: S1 alpha.md, {place}.",
            channels={"bm25": [[chunk.pk, 1.0]]},
        )
        link = f'href="/sources/{source.pk}/?chunk={chunk.pk}#chunk-{chunk.pk}"'
        assert link in login(alice).get(f"/ask/{row.pk}/").content.decode(), place
    for note in notes:
        links = footnote_links(f"Text [^1].\n\n[^1]: {note}\n", [chunk.pk], alice)
        marked = f"&lines={lines}" if lines else ""
        assert links == {"1": f"/sources/{source.pk}/?chunk={chunk.pk}{marked}#chunk-{chunk.pk}"}, note


@pytest.mark.django_db
def test_a_passage_across_a_page_break_links_in_its_format_and_in_the_one_before(world: World) -> None:
    chunk = crossing(world.sources["alpha"], text="Across.", heading="Wiring")
    assert_linked(
        world,
        chunk,
        ("§ Wiring, p. 1, line 26 – p. 2, line 4", "§ Wiring, pp. 1–2, lines 26–4"),
        ("alpha.md §Wiring, p. 1, line 26 – p. 2, line 4", "alpha.md §Wiring, pp. 1–2, lines 26–4"),
    )


@pytest.mark.django_db
def test_a_one_line_passage_links_in_its_format_and_in_the_one_before(world: World) -> None:
    chunk = Chunk.objects.create(
        source=world.sources["alpha"],
        ordinal=9,
        text="One line.",
        heading="Wiring",
        page_start=3,
        page_end=3,
        line_start=52,
        line_end=52,
        token_count=2,
    )
    assert chunk.location == "§ Wiring, p. 3, line 52"
    assert_linked(
        world,
        chunk,
        ("§ Wiring, p. 3, line 52", "p. 3, lines 52-52"),
        ("alpha.md §Wiring, p. 3, line 52", "alpha.md §Wiring, p. 3, lines 52-52"),
        lines="52-52",
    )


@pytest.mark.django_db
def test_footnotes_of_sheet_rows_word_paragraphs_and_slides_link_to_their_lines(world: World) -> None:
    from generation.present import footnote_links

    alice = world.users["alice"]
    for kind, heading, page, note, lines in (
        ("xlsx", "Pumps", None, "alpha.md, sheet Pumps, row 23", "23-23"),
        ("csv", "", None, "alpha.md, rows 21-22", "21-22"),
        ("docx", "Safety", None, "alpha.md §Safety, paragraphs 21-24", "21-24"),
        ("pptx", "Agenda", 3, "alpha.md §Agenda, slide 3, line 22", "22-22"),
    ):
        source = world.sources["alpha"]
        source.kind = kind
        source.save()
        chunk = Chunk.objects.create(
            source=source,
            ordinal=20,
            text="a\n\nb",
            heading=heading,
            page_start=page,
            page_end=page,
            line_start=20,
            line_end=25,
            token_count=2,
        )
        assert footnote_links(f"Text [^1].\n\n[^1]: {note}\n", [chunk.pk], alice) == {
            "1": f"/sources/{source.pk}/?chunk={chunk.pk}&lines={lines}#chunk-{chunk.pk}"
        }, note
        chunk.delete()
