"""Where a chunk sits, as citations print it: a chunk that crosses a page names both pages."""
from __future__ import annotations

import pytest
from django.test import Client

from sources.models import Chunk, place_text
from tests.conftest import World, login, record_query


@pytest.mark.parametrize(("pages", "lines", "expected"), [
    ((1, 2), (26, 4), "pp. 1–2, lines 26–4"),
    ((3, 3), (4, 15), "p. 3, lines 4-15"),
    ((3, None), (4, 15), "p. 3, lines 4-15"),
    ((None, None), (4, 15), "lines 4-15"),
])
def test_place_text(pages: tuple, lines: tuple, expected: str) -> None:
    assert place_text(*pages, *lines) == expected


def test_chunk_location_keeps_the_section() -> None:
    chunk = Chunk(heading="Wiring", page_start=1, page_end=2, line_start=26, line_end=4)
    assert chunk.location == "§ Wiring, pp. 1–2, lines 26–4"


@pytest.mark.django_db
def test_viewer_and_answer_sources_print_both_pages(world: World) -> None:
    chunk = Chunk.objects.create(source=world.sources["alpha"], ordinal=9, text="Across the page break.",
                                 page_start=1, page_end=2, line_start=26, line_end=4, token_count=4)
    client: Client = login(world.users["alice"])
    viewer = client.get(f"/sources/{chunk.source_id}/?chunk={chunk.pk}").content.decode()
    assert "pp. 1–2, lines 26–4" in viewer and "lines 26-1" not in viewer
    row = record_query(world.users["alice"], answer="Across the page break. [S1]",
                       citations=[{"id": "S1", "chunk_id": chunk.pk, "source": "alpha.md", "title": "alpha.md",
                                   "heading": "", "page": 1, "lines": [26, 4], "score": 0.9}])
    answer = client.get(f"/ask/{row.pk}/").content.decode()
    assert "pp. 1–2, lines 26–4" in answer and "p. 1 ·" not in answer
