"""Safe HTML for answers and generated documents."""

from __future__ import annotations

import pytest
from django.test import Client

from generation.present import answer_html, document_html
from sources.models import Chunk
from tests.conftest import World


def test_answer_markers_become_links_and_text_is_escaped() -> None:
    html = answer_html("Power <b>is</b> 24 V [S1]. Bus [S9].\nNext line\n\nSecond [S2]", {"S1", "S2"})
    assert html == (
        '<p>Power &lt;b&gt;is&lt;/b&gt; 24 V <a class="cite" href="#source-S1">[S1]</a>. Bus [S9].'
        '<br>\nNext line</p>\n<p>Second <a class="cite" href="#source-S2">[S2]</a></p>'
    )


def test_answer_markdown_is_rendered_and_its_html_and_links_are_not() -> None:
    html = str(
        answer_html(
            "**Wiring**: use *shielded* cable [S1].\n\n- A to A\n- B to B\n\n| pin | use |\n|---|---|\n"
            "| 1 | A |\n\n<script>alert(1)</script> <img src=x onerror=alert(2)> "
            "[click](javascript:alert(3)) [site](https://evil.example/) `x<y`",
            {"S1"},
        )
    )
    assert "<strong>Wiring</strong>" in html and "<em>shielded</em>" in html and "<li>A to A</li>" in html
    assert "<table>" in html and '<a class="cite" href="#source-S1">[S1]</a>' in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "&lt;img src=x onerror=alert(2)&gt;" in html
    assert "<script" not in html and "<img" not in html and "javascript:" not in html and "evil.example" not in html
    assert "<code>x&lt;y</code>" in html


def test_source_viewer_renders_markdown_sources_safely(world: World) -> None:
    from sources.models import Source

    source = world.sources["alpha"]
    assert source.kind == Source.Kind.MD
    chunk = Chunk.objects.create(
        source=source,
        ordinal=7,
        line_start=20,
        line_end=24,
        token_count=9,
        text="## Wiring\n\nUse **shielded** cable. <img src=x onerror=alert(1)>\n"
        "[manual](https://example.com/m) [bad](javascript:alert(2)) [rel](other.md)",
    )
    client = Client()
    client.force_login(world.users["alice"])
    page = client.get(f"/sources/{source.pk}/?chunk={chunk.pk}").content.decode()
    assert "<h2>Wiring</h2>" in page and "<strong>shielded</strong>" in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page and "<img src=x" not in page
    assert '<a href="https://example.com/m" rel="nofollow noopener noreferrer">manual</a>' in page
    assert "javascript:" not in page and 'href="other.md"' not in page


def test_document_keeps_markdown_and_footnotes_and_drops_active_content() -> None:
    html = document_html(
        "# Guide <script>alert(1)</script>\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n"
        "Text[^1] <img src=x onerror=alert(1)> [x](javascript:alert(1)) [y](https://e.x/)\n"
        '<div id="result" onclick="x()">d</div>\n\n[^1]: manual.md, lines 1-2\n'
    )
    assert "<h1>Guide </h1>" in html and "<table>" in html and 'href="#fn:1"' in html and 'id="fn:1"' in html
    for bad in ("<script", "alert(1)</script>", "onerror", "javascript:", "onclick", 'id="result"', "https://e.x"):
        assert bad not in html, bad


@pytest.mark.django_db
def test_every_reference_to_a_footnote_keeps_the_id_its_back_link_points_to() -> None:
    html = str(document_html("A [^1]. B [^1].\n\n## Sources\n\n[^1]: x.md, lines 1-2\n"))
    assert '<sup id="fnref:1">' in html and '<sup id="fnref2:1">' in html and 'href="#fnref2:1"' in html


def test_source_viewer_escapes_document_text(world: World) -> None:
    chunk = Chunk.objects.create(
        source=world.sources["alpha"],
        ordinal=5,
        text="<script>alert(1)</script>",
        heading="<img src=x onerror=alert(1)>",
        line_start=9,
        line_end=9,
        token_count=3,
    )
    client = Client()
    client.force_login(world.users["alice"])
    page = client.get(f"/sources/{chunk.source_id}/?chunk={chunk.pk}").content.decode()
    assert "<script>alert(1)</script>" not in page and "<img src=x onerror" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
