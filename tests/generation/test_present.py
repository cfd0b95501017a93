"""Safe HTML for answers and generated documents."""
from __future__ import annotations

import pytest
from django.test import Client

from generation.present import answer_html, document_html
from sources.models import Chunk
from tests.conftest import World


def test_answer_markers_become_links_and_text_is_escaped() -> None:
    html = answer_html("Power <b>is</b> 24 V [S1]. Bus [S9].\nNext line\n\nSecond [S2]", {"S1", "S2"})
    assert html == ('<p>Power &lt;b&gt;is&lt;/b&gt; 24 V <a class="cite" href="#source-S1">[S1]</a>. Bus [S9].'
                    '<br>Next line</p><p>Second <a class="cite" href="#source-S2">[S2]</a></p>')


def test_document_keeps_markdown_and_footnotes_and_drops_active_content() -> None:
    html = document_html("# Guide <script>alert(1)</script>\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n"
                         "Text[^1] <img src=x onerror=alert(1)> [x](javascript:alert(1)) [y](https://e.x/)\n"
                         "<div id=\"result\" onclick=\"x()\">d</div>\n\n[^1]: manual.md, lines 1-2\n")
    assert "<h1>Guide </h1>" in html and "<table>" in html and 'href="#fn:1"' in html and 'id="fn:1"' in html
    for bad in ("<script", "alert(1)</script>", "onerror", "javascript:", "onclick", 'id="result"', "https://e.x"):
        assert bad not in html, bad


@pytest.mark.django_db
def test_every_reference_to_a_footnote_keeps_the_id_its_back_link_points_to() -> None:
    html = str(document_html("A [^1]. B [^1].\n\n## Sources\n\n[^1]: x.md, lines 1-2\n"))
    assert '<sup id="fnref:1">' in html and '<sup id="fnref2:1">' in html and 'href="#fnref2:1"' in html


def test_source_viewer_escapes_document_text(world: World) -> None:
    chunk = Chunk.objects.create(source=world.sources["alpha"], ordinal=5, text="<script>alert(1)</script>",
                                 heading="<img src=x onerror=alert(1)>", line_start=9, line_end=9, token_count=3)
    client = Client()
    client.force_login(world.users["alice"])
    page = client.get(f"/sources/{chunk.source_id}/?chunk={chunk.pk}").content.decode()
    assert "<script>alert(1)</script>" not in page and "<img src=x onerror" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
