"""Every place a citation appears links to the same viewer page, at the citation's quoted lines."""

from __future__ import annotations

import pytest
from django.test import Client

from foundry_site.mcp import tools
from sources.viewer import viewer_url
from tests.conftest import World, record_query

pytestmark = pytest.mark.django_db


def test_viewer_url_names_the_chunk_and_its_lines() -> None:
    assert viewer_url(3, 7, [4, 9]) == "/sources/3/?chunk=7&lines=4-9#chunk-7"
    assert viewer_url(3, 7) == "/sources/3/?chunk=7#chunk-7"


def test_the_query_log_links_a_citation_at_its_lines(client: Client, world: World) -> None:
    chunk = world.chunks["alpha"][0]
    citation = {
        "id": "S1",
        "chunk_id": chunk.pk,
        "source": "alpha.md",
        "title": "",
        "page": None,
        "lines": [1, 1],
        "score": 0.5,
    }
    row = record_query(world.users["alice"], citations=[citation])
    client.force_login(world.users["alice"])
    html = client.get(f"/query-log/{row.pk}/").content.decode()
    link = viewer_url(chunk.source_id, chunk.pk, [1, 1]).replace("&", "&amp;")
    assert f'<a href="{link}">alpha.md</a>' in html
    # An auditor who cannot read the source sees its name, not a link to a page that would be 404.
    hidden = record_query(world.users["bob"], citations=[citation])
    client.force_login(world.users["bob"])
    page = client.get(f"/query-log/{hidden.pk}/").content.decode()
    assert "<td>alpha.md</td>" in page and f"/sources/{chunk.source_id}/" not in page


def test_mcp_get_chunk_and_ask_citations_carry_the_viewer_link(world: World) -> None:
    chunk = world.chunks["alpha"][1]
    read = tools.get_chunk(world.users["alice"], chunk_id=chunk.pk, neighbours=1)
    assert read["chunk"]["viewer_url"] == viewer_url(chunk.source_id, chunk.pk)
    assert read["before"][0]["viewer_url"] == viewer_url(chunk.source_id, world.chunks["alpha"][0].pk)
    cited = tools.cited_in_viewer([{"id": "S1", "chunk_id": chunk.pk, "lines": [3, 3]}, {"id": "S2", "chunk_id": -1}])
    assert cited[0]["viewer_url"] == viewer_url(chunk.source_id, chunk.pk, [3, 3])
    assert "viewer_url" not in cited[1]  # a passage no longer indexed has no page to open
