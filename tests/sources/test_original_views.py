"""The original file inline for the viewer's pdf.js page: scoped as every page is, served so it cannot run."""

from __future__ import annotations

import json
import re
from html import unescape
from pathlib import Path

import pytest
from django.test import Client
from django.utils import timezone

from sources.models import Chunk, Source
from tests.conftest import World, make_pdf

pytestmark = pytest.mark.django_db

PDF_PAGES = [("One", "The first page."), ("Two", "The relay switches 2 A.\nIt needs a diode.\nThe end.")]


@pytest.fixture
def pdf(world: World) -> Source:
    root = Path(world.sources["alpha"].root)
    make_pdf(root / "relay.pdf", PDF_PAGES)
    source = Source.objects.create(
        collection=world.collections["alpha"],
        root=str(root),
        path="relay.pdf",
        title="Relay",
        kind="pdf",
        status=Source.Status.INGESTED,
        chunk_count=1,
        ingested_at=timezone.now(),
    )
    Chunk.objects.create(
        source=source,
        ordinal=0,
        text=PDF_PAGES[1][1],
        page_start=2,
        page_end=2,
        line_start=3,
        line_end=5,
        token_count=12,
    )
    return source


def quote(html: str) -> dict:
    found = re.search(r'<script id="original-quote" type="application/json">(.*?)</script>', html, re.S)
    assert found, "no quote for the original page"
    return json.loads(unescape(found.group(1)))


def test_the_original_is_served_inline_to_its_readers_only(client: Client, world: World, pdf: Source) -> None:
    client.force_login(world.users["alice"])
    response = client.get(f"/sources/{pdf.pk}/original")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/pdf"
    assert response["Content-Disposition"] == 'inline; filename="relay.pdf"'
    assert response["X-Content-Type-Options"] == "nosniff"
    assert "private" in response["Cache-Control"]
    assert b"".join(response.streaming_content) == (Path(pdf.root) / "relay.pdf").read_bytes()

    client.force_login(world.users["bob"])  # reads beta, not alpha: the same 404 as for a source that does not exist
    assert client.get(f"/sources/{pdf.pk}/original").status_code == 404
    assert client.get(f"/sources/{pdf.pk}/?chunk={pdf.chunks.get().pk}").status_code == 404
    client.logout()
    assert client.get(f"/sources/{pdf.pk}/original").status_code == 302  # to the sign-in page


def test_only_a_pdf_is_served_inline(client: Client, world: World, tmp_path: Path) -> None:
    # An HTML source inline would be a page of this site; a text file could be sniffed as one.
    source = world.sources["alpha"]
    client.force_login(world.users["alice"])
    for kind in ("md", "html", "txt"):
        Source.objects.filter(pk=source.pk).update(kind=kind)
        assert client.get(f"/sources/{source.pk}/original").status_code == 404, kind
    assert client.get(f"/sources/{source.pk}/download").status_code == 200


def test_the_original_refuses_paths_outside_the_root(client: Client, world: World, pdf: Source, tmp_path: Path) -> None:
    secret = tmp_path / "secret.pdf"
    secret.write_bytes((Path(pdf.root) / "relay.pdf").read_bytes())
    client.force_login(world.users["alice"])
    Source.objects.filter(pk=pdf.pk).update(path="../../secret.pdf")
    assert client.get(f"/sources/{pdf.pk}/original").status_code == 404
    Source.objects.filter(pk=pdf.pk).update(path="gone.pdf")
    assert client.get(f"/sources/{pdf.pk}/original").status_code == 404


def test_a_pdf_citation_carries_its_page_and_quote_to_the_viewer(client: Client, world: World, pdf: Source) -> None:
    chunk = pdf.chunks.get()
    client.force_login(world.users["alice"])
    html = client.get(f"/sources/{pdf.pk}/?chunk={chunk.pk}&lines=4-4").content.decode()
    assert quote(html) == {"page": 2, "pages": [2, 2], "lines": ["It needs a diode."]}
    assert f'data-url="/sources/{pdf.pk}/original"' in html
    assert 'type="module" src="/static/foundry/pdf_page.mjs"' in html
    # Without lines the whole passage is the quote; a page without a citation has no original page.
    assert quote(client.get(f"/sources/{pdf.pk}/?chunk={chunk.pk}").content.decode())["lines"] == [
        "The relay switches 2 A.",
        "It needs a diode.",
        "The end.",
    ]
    assert 'id="original"' not in client.get(f"/sources/{pdf.pk}/").content.decode()
    # Other kinds keep the text view only.
    alpha = world.chunks["alpha"][0]
    assert 'id="original"' not in client.get(f"/sources/{alpha.source_id}/?chunk={alpha.pk}").content.decode()


def test_the_policy_lets_pdfjs_run_its_worker_from_our_files_without_eval(
    client: Client, world: World, pdf: Source
) -> None:
    client.force_login(world.users["alice"])
    policy = client.get(f"/sources/{pdf.pk}/?chunk={pdf.chunks.get().pk}")["Content-Security-Policy"]
    directives = dict(d.strip().split(" ", 1) for d in policy.split(";") if d.strip())
    assert directives["worker-src"] == "'self'"
    assert "unsafe-eval" not in policy and "blob:" not in policy
    assert "font-src" not in directives and directives["default-src"] == "'self'"  # no remote fonts


def test_pdfjs_is_installed_into_the_static_files() -> None:
    # `make install` copies them from the pinned npm package; the viewer cannot show a page without them.
    from django.contrib.staticfiles import finders

    for name in ("pdf.min.mjs", "pdf.worker.min.mjs", "LICENSE", "standard_fonts/LiberationSans-Regular.ttf"):
        assert finders.find(f"foundry/pdfjs/{name}"), f"foundry/pdfjs/{name} missing: run make install"
    lock = json.loads((Path(__file__).resolve().parents[2] / "frontend" / "package-lock.json").read_text())
    assert lock["packages"][""]["dependencies"]["pdfjs-dist"] == lock["packages"]["node_modules/pdfjs-dist"]["version"]


def test_a_cited_markdown_chunk_is_rendered_line_for_line(client: Client, world: World) -> None:
    source = world.sources["alpha"]  # a Markdown source
    text = "## Wiring\nUse **shielded** cable, see [the guide](https://example.com/g).\n- Keep `stubs` short.\n<b>x</b>"
    chunk = Chunk.objects.create(source=source, ordinal=2, text=text, line_start=10, line_end=13, token_count=9)
    client.force_login(world.users["alice"])
    html = client.get(f"/sources/{source.pk}/?chunk={chunk.pk}&lines=11-12").content.decode()
    lines = re.findall(r'<span class="line( cited)?"><span class="n" aria-hidden="true">(\d+)</span>', html)
    assert lines == [("", "10"), (" cited", "11"), (" cited", "12"), ("", "13")]  # the numbers kept
    assert '<strong class="md-h">Wiring</strong>' in html and "## Wiring" not in html
    assert "<mark>Use <strong>shielded</strong> cable, see <a" in html and "**" not in html
    assert 'href="https://example.com/g" rel="nofollow noopener noreferrer">the guide</a>' in html
    assert "<mark>• Keep <code>stubs</code> short.</mark>" in html
    assert "&lt;b&gt;x&lt;/b&gt;" in html  # raw HTML in a source stays text


def image_source(world: World, name: str, data: bytes) -> Source:
    root = Path(world.sources["alpha"].root)
    (root / name).write_bytes(data)
    return Source.objects.create(
        collection=world.collections["alpha"],
        root=str(root),
        path=name,
        title=name,
        kind="image",
        status=Source.Status.INGESTED,
        ingested_at=timezone.now(),
    )


def test_an_image_is_served_inline_and_a_tiff_as_png(client: Client, world: World) -> None:
    from PIL import Image

    from tests.sources.test_ocr import encoded

    page = Image.new("L", (40, 20), 255)
    png, tiff = (
        image_source(world, "scan.png", encoded(page, "PNG")),
        image_source(world, "scan.tif", encoded(page, "TIFF")),
    )
    client.force_login(world.users["alice"])
    response = client.get(f"/sources/{png.pk}/original")
    assert response.status_code == 200 and response["Content-Type"] == "image/png"
    assert response["Content-Disposition"] == 'inline; filename="scan.png"'
    assert response["X-Content-Type-Options"] == "nosniff"
    converted = client.get(f"/sources/{tiff.pk}/original?page=1")  # Chromium shows no TIFF
    assert converted.status_code == 200 and converted["Content-Type"] == "image/png"
    assert (
        converted.content.startswith(b"\x89PNG") and converted["Content-Disposition"] == 'inline; filename="scan.png"'
    )
    client.force_login(world.users["bob"])
    assert client.get(f"/sources/{png.pk}/original").status_code == 404
    assert client.get(f"/sources/{tiff.pk}/original").status_code == 404


def test_an_ocr_citation_without_its_image_says_so(client: Client, world: World) -> None:
    from PIL import Image

    from tests.sources.test_ocr import encoded

    source = image_source(world, "gone.png", encoded(Image.new("L", (40, 20), 255), "PNG"))
    chunk = Chunk.objects.create(source=source, ordinal=0, text="A line.", line_start=1, line_end=1, token_count=2)
    (Path(source.root) / "gone.png").unlink()
    client.force_login(world.users["alice"])
    html = client.get(f"/sources/{source.pk}/?chunk={chunk.pk}&lines=1-1").content.decode()
    assert "The quoted words cannot be boxed: The original file is not available." in html
    assert "<img" not in html and "A line." in html  # the text is still shown
