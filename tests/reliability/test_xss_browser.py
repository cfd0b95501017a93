"""Stored XSS: hostile documents, notes, answers and generated documents stay inert in a real browser.

Every payload calls ``__xss(label)`` (a Playwright binding) or opens a dialog, so a
script that runs is caught by name. A payload that reaches the page as live markup
but is stopped by the Content-Security-Policy still fails the test: chromium logs the
violation as a console error, and the DOM audit finds the live element (an event
handler attribute, a ``javascript:`` URL, a frame, a script carrying a payload).

The live server runs in this process, so the scripted LLM answers and writes the
documents: it copies the hostile passages into its answers and puts hostile
Markdown into a generated document. Ingest, embeddings, retrieval, grounding, the
answer stream and every page are real.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User

from generation.models import GenerationRun
from generation.models import QueryFeedback, QueryLog
from sources.models import Chunk, Source
from sources.services.collections import collection_create, collection_grant
from sources.services.ingest_jobs import knowledge_base_ingest
from specs import services as specs
from specs.models import FeatureSpec
from tests.conftest import PASSWORD, ScriptedLLM, make_pdf
from tests.generation.conftest import echo_reply

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

MARKDOWN = """# Relay module <script>__xss("md-title")</script>

## Switching <img src=x onerror=__xss("md-heading")>

The relay <img src=x onerror=__xss("md-img")> switches up to 5 A at 230 V AC.
Read the [relay wiring guide](javascript:__xss("md-link")) before you connect the relay.
The relay coil <svg onload=__xss("md-svg")></svg> draws 40 mA at 24 V DC.
<a href="javascript:__xss('md-anchor')">Terminal X4</a> carries the relay alarm output.
The ![relay diagram](data:text/html;base64,PHNjcmlwdD5fX3hzcygibWQtZGF0YSIpPC9zY3JpcHQ+) shows the relay terminals.
<iframe srcdoc="<script>parent.__xss('md-iframe')</script>"></iframe>
<details open ontoggle=__xss("md-details")><summary>Relay notes</summary>The relay contacts last 100000 cycles.</details>
The [relay datasheet](data:text/html,<script>__xss("md-data-link")</script>) lists the relay contact ratings.
The relay IMAX = 5 A <img src=x onerror=__xss("md-conflict")> is the contact limit.
"""
TEXT = """Pump controller notes <script>__xss("txt-script")</script>

The pump controller <img src=x onerror=__xss("txt-img")> starts the pump at 3 bar.
Open javascript:__xss("txt-js") in the service menu to reset the pump controller.
The pump relay IMAX = 8 A <svg onload=__xss("txt-conflict")> is the contact limit.
"""
JSON = {
    "title": "Valve <svg onload=__xss('json-title')>",
    "valve": {
        "note": 'The valve <img src=x onerror=__xss("json-img")> closes within 2 seconds.',
        "link": "javascript:__xss('json-link')",
    },
}
PDF_PAGES = [
    (
        "Fan unit <script>__xss('pdf-heading')</script>",
        "The fan unit <img src=x onerror=__xss('pdf-img')> runs at 1400 rpm.",
    )
]
HOSTILE_NAME = "notes\"><img src=x onerror=__xss('name')>.md"
BROKEN_NAME = "broken<svg onload=__xss('broken-name')>.json"

QUESTION = 'Which current does the relay <img src=x onerror=__xss("question")> switch?'
NOTE = '<script>__xss("note-script")</script><img src=x onerror=__xss("note-img")> [x](javascript:__xss("note"))'
TOPIC = 'Relay wiring <img src=x onerror=__xss("topic")>'
DOCUMENT_HEAD = """# Relay guide <script>__xss("doc-h1")</script>

## Terminals <img src=x onerror=__xss("doc-h2")>
"""
DOCUMENT_TAIL = """
| Terminal <svg onload=__xss("doc-table")> | [open](javascript:__xss("doc-table-link")) |
|---|---|
| X4 <img src=x onerror=__xss("doc-cell")> | ![x](data:text/html,<script>__xss("doc-img")</script>) |

```html
<script>__xss("doc-fence")</script>
```
"""

# Everything in the DOM that would run script: handler attributes, script URLs, frames,
# and script elements carrying a payload. The pages' own scripts never mention __xss.
DOM_AUDIT = """() => {
  const found = [];
  const urlAttrs = ["href", "src", "action", "formaction", "data", "xlink:href", "poster", "background"];
  for (const el of document.querySelectorAll("*")) {
    for (const attr of el.attributes) {
      const name = attr.name.toLowerCase();
      const value = attr.value.replace(/\\s+/g, "").toLowerCase();
      if (name.startsWith("on")) found.push(`${el.tagName} ${name}`);
      if (name === "srcdoc") found.push(`${el.tagName} srcdoc`);
      if (urlAttrs.includes(name) && (value.startsWith("javascript:") || value.startsWith("data:text/html")))
        found.push(`${el.tagName} ${name}=${attr.value.slice(0, 40)}`);
    }
    if (["IFRAME", "FRAME", "OBJECT", "EMBED"].includes(el.tagName)) found.push(el.tagName);
    // A JSON data block (Django's json_script: <, > and & escaped) is data the page reads, never run.
    if (el.tagName === "SCRIPT" && el.type !== "application/json" && el.textContent.includes("__xss"))
      found.push("SCRIPT with a payload");
  }
  return found;
}"""


@dataclass
class Tripwire:
    """Collects every sign that hostile content became live on the pages a test visits."""

    fired: list[str] = field(default_factory=list)
    csp_headers: dict[str, str] = field(default_factory=dict)

    def attach(self, page: Any) -> None:
        page.expose_function("__xss", lambda label: self.fired.append(f"script ran: {label}"))
        page.on("dialog", self._dialog)
        page.on("pageerror", lambda exc: self.fired.append(f"page error: {exc}"))
        page.on("console", self._console)

    def _console(self, message: Any) -> None:
        # A hostile <img src=x> that became live also shows up here, as a failed load of "x".
        # Chromium asks every site for /favicon.ico on its own; that 404 is not from the page.
        if message.type == "error" and not message.location.get("url", "").endswith("/favicon.ico"):
            self.fired.append(f"console error: {message.text} ({message.location.get('url')})")

    def _dialog(self, dialog: Any) -> None:
        self.fired.append(f"dialog: {dialog.message}")
        dialog.dismiss()

    def visit(self, page: Any, url: str) -> None:
        response = page.goto(url)
        assert response is not None and response.status == 200, (url, response and response.status)
        self.check(page, url, response)

    def check(self, page: Any, url: str, response: Any = None) -> None:
        """Audit the page as it is now: DOM, then (if given) the response's CSP header."""
        page.wait_for_load_state("load")
        live = page.evaluate(DOM_AUDIT)
        assert live == [], f"live hostile markup on {url}: {live}"
        if response is not None:
            self.csp_headers[url] = response.headers.get("content-security-policy", "")


def generator_reply(messages: list[dict]) -> str:
    """Answers echo a cited sentence per passage; documents copy every passage line and add hostile Markdown."""
    if not messages[-1]["content"].startswith("Topic:"):
        return echo_reply(messages)
    context = messages[0]["content"].rsplit("</context>", 1)[0].rsplit("<context>\n", 1)[1]
    lines = []
    for block in context.strip().split("\n\n"):
        head, _, text = block.partition("\n")
        if head.startswith("[S"):
            label = head[1:].split("]", 1)[0]
            lines += [f"{line} [{label}]" for line in text.splitlines() if line.strip() and not line.startswith("#")]
    return DOCUMENT_HEAD + "\n" + "\n".join(lines) + "\n" + DOCUMENT_TAIL


@pytest.fixture
def hostile_site(
    foundry_config: Callable[..., Any], scripted_llm: ScriptedLLM, make_user: Callable[..., Any], kb: Path
) -> dict[str, Any]:
    """A collection of hostile md/txt/json/pdf files (and a broken one), ingested for real; an approved spec."""
    foundry_config(
        generation={"model": "scripted/generator"},
        ingest={"summary_model": "none"},
        embedding={"context_model": "none"},
        retrieval={"hyde": False, "scorer_model": "none", "min_chunks": 1},
    )
    make_user("alice")
    make_user("root", superuser=True)
    collection_create(name="hostile")
    collection_grant(collection="hostile", username="alice")
    (kb / "relay.md").write_text(MARKDOWN)
    (kb / "pump.txt").write_text(TEXT)
    (kb / "valve.json").write_text(json.dumps(JSON))
    make_pdf(kb / "fan.pdf", PDF_PAGES, title="Fan <script>__xss('pdf-title')</script>")
    (kb / HOSTILE_NAME).write_text(MARKDOWN.replace("Relay module", "Relay notes"))
    (kb / BROKEN_NAME).write_text('{"valve": <script>__xss("broken")</script>')
    knowledge_base_ingest(target=kb, collection="hostile")
    assert Source.objects.filter(status=Source.Status.INGESTED).count() == 5
    assert Source.objects.get(path=BROKEN_NAME).status == Source.Status.FAILED
    author, reviewer = User.objects.create_user("author"), User.objects.create_user("rita")
    reviewer.user_permissions.add(Permission.objects.get(codename="approve_featurespec"))
    specs.spec_create(
        name="relay-guide",
        title='Relay <img src=x onerror=__xss("spec-title")>',
        body='# Relay guide <script>__xss("spec-body")</script>\n\nCover the relay terminals.\n',
        by=author,
    )
    specs.spec_submit(name="relay-guide", by=author)
    specs.spec_approve(
        name="relay-guide", by=User.objects.get(pk=reviewer.pk), note='<img src=x onerror=__xss("decision-note")>'
    )
    scripted_llm.reply = generator_reply
    return {"llm": scripted_llm}


def sign_in(page: Any, base: str, username: str) -> None:
    page.goto(f"{base}/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r".*/(ask/|admin/)$"))


def test_hostile_content_stays_inert_on_every_reader_page(
    browser_page: Any, live_server: Any, hostile_site: dict[str, Any]
) -> None:
    from playwright.sync_api import expect

    expect.set_options(timeout=60_000)
    page, base, trip = browser_page, live_server.url, Tripwire()
    trip.attach(page)
    sign_in(page, base, "alice")

    # Ask with JavaScript: the answer arrives through the stream and is put in with innerHTML.
    page.fill("#id_question", QUESTION)
    page.click("#ask-form button[type=submit]")
    expect(page.locator("#answer")).to_be_visible()
    row = QueryLog.objects.get()
    assert row.answer_class != QueryLog.AnswerClass.NO_EVIDENCE and "onerror=__xss(" in row.answer
    expect(page.locator(".answer-text")).to_contain_text('<img src=x onerror=__xss("md-img")>')
    trip.check(page, "ask (streamed answer)")

    # Feedback note through the form, then the answer page rendered by the server.
    page.fill(".feedback input[name=note]", NOTE)
    page.click(".feedback button[value=incorrect]")
    expect(page.locator(".feedback-list")).to_contain_text('<script>__xss("note-script")</script>')
    assert QueryFeedback.objects.get().note == NOTE
    trip.visit(page, f"{base}/ask/{row.pk}/")
    trip.visit(page, f"{base}/ask/")  # the recent-questions list

    # The source viewer for every kind, at a cited chunk and whole; the sources list with the failed file.
    for source in Source.objects.filter(status=Source.Status.INGESTED):
        chunk = Chunk.objects.filter(source=source).first()
        trip.visit(page, f"{base}/sources/{source.pk}/?chunk={chunk.pk}#chunk-{chunk.pk}")
    expect(page.locator(".chunk").first).to_contain_text("__xss")
    # A Markdown source reads formatted (its links are Markdown, not text), its raw HTML shown as text.
    relay = Source.objects.get(path="relay.md")
    trip.visit(page, f"{base}/sources/{relay.pk}/")
    expect(page.locator(".chunk .md p").first).to_be_visible()
    expect(page.locator("main")).to_contain_text('<img src=x onerror=__xss("md-img")>')
    expect(page.locator("main")).to_contain_text("Read the relay wiring guide")
    expect(page.locator("main")).not_to_contain_text("[relay wiring guide]")
    trip.visit(page, f"{base}/sources/")
    expect(page.locator("table")).to_contain_text(BROKEN_NAME)
    trip.visit(page, f"{base}/sources/?collection=hostile")

    # The audit pages.
    trip.visit(page, f"{base}/query-log/")
    # The question's markup was taken out before it was asked and logged (#60): the log shows it as answered.
    expect(page.locator(f"#query-{row.pk}")).to_contain_text("Which current does the relay switch?")
    trip.visit(page, f"{base}/query-log/{row.pk}/")
    expect(page.locator("#feedback-list")).to_contain_text('<img src=x onerror=__xss("note-img")>')
    trip.visit(page, f"{base}/dashboard/")

    # A generated document with hostile Markdown, headings, tables and copied hostile passages.
    trip.visit(page, f"{base}/generate/")
    page.fill("#id_topic", TOPIC)
    page.select_option("#id_feature", "relay-guide")
    page.click("button:has-text('Generate')")
    expect(page.locator("#run-status")).to_have_text("Succeeded")
    run = GenerationRun.objects.get()
    written = Path(run.output_path).read_text()
    # The hostile constructs reached the renderer: the test is not passing on an empty document.
    # (Script elements the model copies are removed with their content before grounding.)
    assert "javascript:" in written and "onerror=" in written and "<script" not in written, written
    expect(page.locator("#document")).to_contain_text("relay wiring guide")
    trip.visit(page, f"{base}/runs/{run.pk}/")
    trip.visit(page, f"{base}/runs/")
    expect(page.locator("table")).to_contain_text("__xss")

    assert trip.fired == []
    assert_strict_csp(trip.csp_headers)


def test_hostile_content_stays_inert_in_the_admin(
    browser_page: Any, live_server: Any, hostile_site: dict[str, Any]
) -> None:
    from generation.pipeline import generation_run_create, generation_run_execute
    from generation.documents import SpecText
    from tests.conftest import record_query

    page, base, trip = browser_page, live_server.url, Tripwire()
    root = User.objects.get(username="root")
    chunk = Chunk.objects.filter(source__path="relay.md").first()
    row = record_query(
        root,
        question=QUESTION,
        answer=MARKDOWN,
        error=NOTE,
        citations=[
            {
                "id": "S1",
                "chunk_id": chunk.pk,
                "source": HOSTILE_NAME,
                "title": NOTE,
                "heading": NOTE,
                "page": None,
                "lines": [1, 2],
                "score": 0.5,
            }
        ],
    )
    feedback = QueryFeedback.objects.create(query=row, user=root, verdict="incorrect", note=NOTE)
    spec = FeatureSpec.objects.get(name="relay-guide")
    run = generation_run_create(topic=TOPIC, spec=SpecText(spec.name, 1, MARKDOWN), user=root)
    generation_run_execute(run_id=run.pk)
    trip.attach(page)
    sign_in(page, base, "root")
    source = Source.objects.get(path=HOSTILE_NAME)
    urls = [
        "/admin/",
        "/admin/sources/source/",
        f"/admin/sources/source/{source.pk}/change/",
        f"/admin/sources/source/{Source.objects.get(path=BROKEN_NAME).pk}/change/",
        "/admin/sources/chunk/",
        f"/admin/sources/chunk/{chunk.pk}/change/",
        "/admin/generation/querylog/",
        f"/admin/generation/querylog/{row.pk}/change/",
        "/admin/generation/queryfeedback/",
        f"/admin/generation/queryfeedback/{feedback.pk}/change/",
        "/admin/generation/generationrun/",
        f"/admin/generation/generationrun/{run.pk}/change/",
        "/admin/specs/featurespec/",
        f"/admin/specs/featurespec/{spec.pk}/change/",
    ]
    for url in urls:
        trip.visit(page, base + url)
    assert trip.fired == []
    assert_strict_csp(trip.csp_headers)


def assert_strict_csp(headers: dict[str, str]) -> None:
    """Every page sent a policy that runs only the site's own script files and nonce-tagged blocks."""
    assert headers
    for url, header in headers.items():
        directives = {d.split()[0]: d.split()[1:] for d in header.split(";") if d.strip()}
        scripts = directives.get("script-src", [])
        assert scripts and all(s == "'self'" or s.startswith("'nonce-") for s in scripts), (url, header)
        assert directives.get("object-src") == ["'none'"] and directives.get("base-uri") == ["'none'"], (url, header)
        assert directives.get("frame-ancestors") == ["'none'"], (url, header)


def test_delete_confirmation_still_works_under_the_policy(browser_page: Any, live_server: Any, world: Any) -> None:
    """The confirm() moved from an inline onsubmit (which the CSP blocks) to a nonce-tagged script."""
    page, base = browser_page, live_server.url
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on(
        "console",
        lambda msg: msg.type == "error" and "favicon" not in msg.location.get("url", "") and errors.append(msg.text),
    )
    answers = iter([False, True])
    asked: list[str] = []

    def answer(dialog: Any) -> None:
        asked.append(dialog.message)
        dialog.accept() if next(answers) else dialog.dismiss()

    page.on("dialog", answer)
    sign_in(page, base, "root")
    source = world.sources["alpha"]
    page.goto(f"{base}/sources/")
    page.click(f"#source-{source.pk} button.danger")  # dismissed: nothing happens
    assert Source.objects.filter(pk=source.pk).exists()
    with page.expect_navigation():
        page.click(f"#source-{source.pk} button.danger")  # accepted: deleted
    assert not Source.objects.filter(pk=source.pk).exists()
    assert asked == ["Delete this source and its chunks?"] * 2 and errors == []
