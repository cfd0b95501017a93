"""Every kind of source cites its own location, end to end: a generated Word, PowerPoint, Excel, CSV, HTML
file and a scanned image are ingested with the real embedding model, a question is asked with the default
extractive reader, and the citation names the paragraphs, the slide, the sheet and rows, the rows, the
section path or the OCR mark: in the JSON API answer, on the ask page, in the query log and in the viewer."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from django.utils.html import escape

from foundry_site.services.tokens import token_create
from sources.models import Chunk
from sources.services.collections import collection_create, collection_grant
from sources.services.ingest_jobs import knowledge_base_ingest
from tests.sources.office_files import make_docx, make_pptx, make_xlsx
from tests.sources.test_ocr import encoded, scanned_page
from tests.sources.test_tasks_broker import clean_index  # noqa: F401  (fixture: vec0 rows outlive a flush)

pytestmark = [pytest.mark.integration, pytest.mark.django_db]

needs_tesseract = pytest.mark.skipif(shutil.which("tesseract") is None, reason="tesseract not installed (make ocr)")

HTML = """<!DOCTYPE html>
<html><head><title>Valve guide</title><script>track()</script></head>
<body><nav><a href="/">Home</a></nav>
<h1>Valve V-200</h1>
<p>The V-200 is a spring-loaded relief valve.</p>
<h2>Commissioning</h2>
<p>The relief valve V-200 opens at 3 bar
and closes at 1 bar.</p>
<p>Flush the line before commissioning.</p>
</body></html>
"""

# question, cited file, the citation's location (a regular expression over the whole text)
LINES = r"(?:line \d+|lines \d+-\d+)"
CASES = {
    "docx": (
        "Which fuse protects the pump's supply?",
        "manual.docx",
        r"§ Installation > Power supply, paragraphs? \d+(-\d+)?",
    ),
    "pptx": ("Which pump recall should be mentioned?", "review.pptx", rf"§ Agenda > Notes, slide 1, {LINES}"),
    "xlsx": ("Which pumps are discontinued?", "pumps.xlsx", r"sheet Notes, rows? \d+(-\d+)?"),
    "csv": ("What is the set pressure of the relief valve RV-17?", "valves.csv", r"rows? \d+(-\d+)?"),
    "html": (
        "At what pressure does the relief valve V-200 open?",
        "valve.html",
        rf"§ Valve V-200 > Commissioning, {LINES}",
    ),
    "image": ("How often must the relief valve be serviced?", "scan.png", rf"{LINES}, OCR, confidence \d+ %"),
}


def write_files(folder: Path) -> None:
    make_docx(folder / "manual.docx")
    make_pptx(folder / "review.pptx")
    make_xlsx(folder / "pumps.xlsx", rows=30)
    rows = [f"RV-{n},{n / 2 + 1:.1f} bar,Building {n % 4 + 1}" for n in range(1, 41)]
    (folder / "valves.csv").write_text("Valve,Set pressure,Location\n" + "\n".join(rows) + "\n")
    (folder / "valve.html").write_text(HTML)
    if shutil.which("tesseract"):
        (folder / "scan.png").write_bytes(encoded(scanned_page(), "PNG"))


@pytest.fixture
def kinds(tmp_path: Path, make_user: Callable[..., Any], foundry_config: Callable[..., Any]) -> Client:
    """Every kind ingested into one collection alice reads; her API client."""
    foundry_config(ingest={"summary_model": "none"}, generation={"model": "extractive", "cache_answers": False})
    make_user("alice")
    collection_create(name="plant")
    collection_grant(collection="plant", username="alice")
    folder = tmp_path / "plant"
    folder.mkdir()
    write_files(folder)
    report = knowledge_base_ingest(target=folder, collection="plant")
    assert report.count("failed") == 0, report.as_dict()
    token = token_create(username="alice", name="test")
    return Client(HTTP_AUTHORIZATION=f"Bearer {token.plain}")


def ask_api(client: Client, question: str) -> dict[str, Any]:
    response = client.post("/api/v1/query", json.dumps({"question": question}), content_type="application/json")
    assert response.status_code == 200, response.content
    return response.json()


@pytest.mark.parametrize("kind", [k for k in CASES if k != "image"] + [pytest.param("image", marks=needs_tesseract)])
def test_each_kind_is_cited_with_its_location(kind: str, kinds: Client, client: Client, django_user_model: Any) -> None:
    question, source, pattern = CASES[kind]
    body = ask_api(kinds, question)
    assert body["answer_class"] in ("normal", "low_confidence"), body
    cited = [c for c in body["citations"] if c["source"] == source]
    assert cited, f"{source} not cited: {[(c['source'], c['location']) for c in body['citations']]}"
    citation = cited[0]
    assert re.fullmatch(pattern, citation["location"]), citation["location"]
    chunk = Chunk.objects.get(pk=citation["chunk_id"])
    assert citation["kind"] == chunk.source.kind == ("image" if kind == "image" else kind)
    if kind == "image":
        assert citation["ocr_confidence"] == round(chunk.ocr_confidence, 1)
    else:
        assert citation["ocr_confidence"] is None

    client.force_login(django_user_model.objects.get(username="alice"))
    response = client.post("/ask/", {"question": question})
    assert response.status_code == 302
    page = client.get(response["Location"]).content.decode()
    entry = re.search(rf'<li id="source-{citation["id"]}" class="source">(.*?)</li>', page, re.S)
    # The ask page's Sources list.
    assert entry and escape(f"{source} · {citation['location']} · score") in entry.group(1)
    query_id = re.fullmatch(r"/conversations/\d+/#turn-(\d+)", response["Location"]).group(1)
    log = client.get(f"/query-log/{query_id}/").content.decode()
    assert f"<td>{escape(citation['location'])}</td>" in log  # the query log's citation table
    viewer = client.get(f"/sources/{chunk.source_id}/?chunk={chunk.pk}").content.decode()
    assert f"{escape(chunk.location)} ·" in viewer  # the source viewer names the chunk the same way
    download = client.get(f"/sources/{chunk.source_id}/download")
    assert download.status_code == 200
    assert b"".join(download.streaming_content) == (Path(chunk.source.absolute_path)).read_bytes()


@pytest.mark.django_db(transaction=True)
def test_the_ask_page_shows_a_slide_and_a_sheet_in_a_browser(
    browser_page: Any, live_server: Any, clean_index: None, kinds: Client
) -> None:
    from playwright.sync_api import expect

    from generation.models import QueryLog
    from tests.generation.test_web_browser import shot, sign_in

    expect.set_options(timeout=60_000)
    page = browser_page
    errors = sign_in(page, live_server.url)
    for kind, name in (("pptx", "citation-slide"), ("xlsx", "citation-sheet")):
        question, source, pattern = CASES[kind]
        page.goto(f"{live_server.url}/ask/")
        page.fill("#id_question", question)
        page.click("#ask-form button[type=submit]")
        expect(page.locator("#answer")).to_be_visible()
        row = QueryLog.objects.order_by("-pk").first()
        citation = next(c for c in row.citations if c["source"] == source)
        assert re.fullmatch(pattern, citation["location"]), citation["location"]
        entry = page.locator(f"#source-{citation['id']}")
        expect(entry).to_contain_text(f"{source} · {citation['location']} · score")
        shot(page, name)
        entry.locator("a").click()
        expect(page.locator(f"#chunk-{citation['chunk_id']} .where")).to_contain_text(
            Chunk.objects.get(pk=citation["chunk_id"]).location
        )
        shot(page, f"{name}-viewer")
    assert errors == []
