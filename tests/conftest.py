"""Shared fixtures: scripted LLM, config overrides, small documents built on the fly."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.utils import timezone

from core import llm
from core.llm import provider
from core.config import FoundryConfig
from tests import strict_templates

# A template that uses an undefined variable, or an {% if %} whose operand raises, fails the test.
strict_templates.enable()


def pytest_report_header(config: pytest.Config) -> str:
    from tests.settings import STORE

    return f"store: {STORE}" + (f" ({django_settings.DATABASES['default']['NAME']})" if STORE == "postgres" else "")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip the tests of the store this run does not use (``tests/settings.py``)."""
    from tests.settings import STORE

    other, reason = (
        ("sqlite_only", "tests the SQLite store itself (FOUNDRY_TEST_STORE=postgres)")
        if STORE == "postgres"
        else ("postgres_only", "needs PostgreSQL: run with FOUNDRY_TEST_STORE=postgres")
    )
    for item in items:
        if item.get_closest_marker(other):
            item.add_marker(pytest.mark.skip(reason=reason))


@dataclass
class ScriptedLLM(llm.CustomLLM):
    """A litellm provider (``scripted/…``) whose replies come from a test-supplied function."""

    reply: Callable[[list[dict[str, str]]], str] = lambda messages: "Scripted reply."
    calls: list[list[dict[str, str]]] = field(default_factory=list)
    completion_tokens: int | None = None  # reported as the reply's usage when set (a reply cut at a token limit)
    stream_pieces: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        super().__init__()

    def completion(
        self,
        model: str,
        messages: list,
        api_base: str,
        custom_prompt_dict: dict,
        model_response: Any,
        *args: Any,
        **kwargs: Any,
    ) -> Any:
        self.calls.append(messages)
        model_response.choices[0].message.content = self.reply(messages)
        model_response.model = f"scripted/{model}"
        if self.completion_tokens is not None:
            model_response.usage = provider.litellm.Usage(
                prompt_tokens=0, completion_tokens=self.completion_tokens, total_tokens=self.completion_tokens
            )
        return model_response

    def streaming(self, model: str, messages: list, *args: Any, **kwargs: Any) -> Iterator[Any]:
        """The same reply, streamed a word at a time (``stream_pieces`` records each piece as it goes out)."""
        self.calls.append(messages)
        words = self.reply(messages).split(" ")
        for i, word in enumerate(words):
            piece = word if i == 0 else " " + word
            self.stream_pieces.append(piece)
            last = i == len(words) - 1
            usage = (0, self.completion_tokens or len(words)) if last else None
            yield provider._stream_chunk(piece, finish="stop" if last else "", usage=usage)


def config_with(base: FoundryConfig, **sections: dict[str, Any]) -> FoundryConfig:
    """A copy of ``base`` with some keys of some sections replaced."""
    updates = {name: getattr(base, name).model_copy(update=values) for name, values in sections.items()}
    return base.model_copy(update=updates)


@pytest.fixture
def scripted_llm() -> Iterator[ScriptedLLM]:
    handler = ScriptedLLM()
    llm.register_provider("scripted", handler)
    yield handler


@pytest.fixture
def foundry_config(settings: Any) -> Callable[..., FoundryConfig]:
    """Call with section overrides, e.g. ``foundry_config(ingest={"max_file_mb": 1})``."""

    def apply(**sections: dict[str, Any]) -> FoundryConfig:
        settings.FOUNDRY = config_with(settings.FOUNDRY, **sections)
        return settings.FOUNDRY

    return apply


@pytest.fixture(autouse=True)
def offline_unit_config(request: pytest.FixtureRequest, settings: Any, tmp_path: Path) -> None:
    """Unit tests never reach a real LLM: every LLM role is off unless a test scripts one.

    Integration tests keep the shipped configuration (real local models).
    """
    settings.FOUNDRY_HOME = tmp_path / "home"
    settings.FOUNDRY_ARTIFACTS = settings.FOUNDRY_HOME / "artifacts"
    if request.node.get_closest_marker("integration"):
        return
    settings.FOUNDRY = config_with(
        django_settings.FOUNDRY,
        embedding={"context_model": "none"},
        ingest={"summary_model": "none"},
        retrieval={"hyde": False, "scorer_model": "none"},
        generation={"model": "scripted/generator"},
    )


@pytest.fixture(autouse=True)
def runs_inline(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a broker, web and API runs execute on a worker thread (``generation.background``).

    A test holds its data in one transaction that no other thread can see, so here such a run
    executes in the calling thread when its transaction commits (with
    ``django_capture_on_commit_callbacks(execute=True)``), as it did before runs went to the
    background. A test that requests the ``run_threads`` fixture keeps the real worker threads.
    """
    if "run_threads" in request.fixturenames:
        return
    from concurrent.futures import Future

    from generation import background

    def submit(run_id: int) -> Future:
        background.run_execute(run_id)
        done: Future = Future()
        done.set_result(None)
        return done

    monkeypatch.setattr(background, "run_submit", submit)


@pytest.fixture
def run_threads() -> None:
    """Runs started from the web or the API execute on the real worker threads (see ``runs_inline``)."""


@pytest.fixture
def kb(tmp_path: Path) -> Path:
    """An empty knowledge-base folder."""
    folder = tmp_path / "kb"
    folder.mkdir()
    return folder


@pytest.fixture
def pump_and_valve(kb: Path, db: None) -> tuple[int, int]:
    """Two collections ingested, ``alpha`` (a pump's page) and ``beta`` (a relief valve's): their ids."""
    from sources.models import Collection
    from sources.services.ingest_jobs import knowledge_base_ingest

    for name, page, text in (
        ("alpha", "pump.md", "# Pump\n\nThe centrifugal pump delivers 40 litres per minute.\n"),
        ("beta", "valve.md", "# Valve\n\nThe relief valve opens at 6 bar of pressure.\n"),
    ):
        (kb / name).mkdir()
        (kb / name / page).write_text(text)
        knowledge_base_ingest(target=kb / name, collection=name)
    alpha, beta = (Collection.objects.get(name=name).pk for name in ("alpha", "beta"))
    return alpha, beta


def make_pdf(
    path: Path,
    pages: list[tuple[str, str]],
    *,
    title: str = "Test PDF",
    header_line: str | Callable[[int], str] = "",
    footer_line: str = "",
) -> Path:
    """Write a PDF with one outline entry and one text block per page: [(heading, text), …]; ``header_line`` and
    ``footer_line``, when given, run on every page ("{page}" is the page's number; a function of it for a header)."""
    from fpdf import FPDF

    class Running(FPDF):
        def header(self) -> None:
            if header_line:
                line = header_line(self.page_no()) if callable(header_line) else header_line.format(page=self.page_no())
                self.cell(0, 6, line)
                self.ln(10)

        def footer(self) -> None:
            if footer_line:
                self.set_y(-15)
                self.cell(0, 6, footer_line.format(page=self.page_no()))

    pdf = Running()
    pdf.set_title(title)
    pdf.set_font("Helvetica", size=11)
    for heading, text in pages:
        pdf.add_page()
        pdf.start_section(heading, level=0)
        pdf.multi_cell(0, 6, heading)
        pdf.ln(4)
        pdf.multi_cell(0, 6, text)
    pdf.output(str(path))
    return path


def make_table_pdf(path: Path) -> Path:
    """Write a one-page PDF with a sentence, a table of three lines (fpdf2's own tables), a list of dashes and two
    columns of prose side by side."""
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("Helvetica", size=10)
    pdf.add_page()
    pdf.multi_cell(0, 6, "The supply input is protected against reverse polarity.")
    with pdf.table(col_widths=(60, 20, 20, 20), first_row_as_headings=True) as table:
        for cells in TABLE_PDF_ROWS:
            row = table.row()
            for cell in cells:
                row.cell(cell)
    for item in ("CE marked", "UKCA"):
        pdf.cell(6, 6, "-")
        pdf.multi_cell(0, 6, item, new_x="LMARGIN", new_y="NEXT")
    top = pdf.get_y() + 4
    for x, words in ((10, "Left column prose runs here"), (110, "Right column prose runs there")):
        pdf.set_xy(x, top)
        pdf.multi_cell(80, 6, "\n".join(f"{words} {n}" for n in (1, 2, 3)))
    pdf.output(str(path))
    return path


TABLE_PDF_ROWS = (
    ("Parameter", "Min.", "Max.", "Unit"),
    ("Main input voltage", "10.8", "26.4", "V DC"),
    ("Power consumption", "-", "4.0", "W"),
)


@pytest.fixture(autouse=True)
def isolated_media_and_cache(settings: Any, tmp_path: Path) -> None:
    """Uploads go to a per-test folder; rate-limit counters live in a per-test memory cache."""
    settings.MEDIA_ROOT = tmp_path / "home" / "uploads"
    settings.CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": str(tmp_path)}
    }


PASSWORD = "correct horse battery staple"


@pytest.fixture
def make_user(django_user_model: Any) -> Callable[..., Any]:
    """``make_user("alice", staff=True)``: a user whose password is ``PASSWORD``."""

    def create(username: str, *, staff: bool = False, superuser: bool = False) -> Any:
        if superuser:
            return django_user_model.objects.create_superuser(username, f"{username}@example.com", PASSWORD)
        return django_user_model.objects.create_user(username, f"{username}@example.com", PASSWORD, is_staff=staff)

    return create


@dataclass
class World:
    """Three collections and their readers, with sources and chunks written straight to the tables."""

    users: dict[str, Any]
    collections: dict[str, Any]
    sources: dict[str, Any]
    chunks: dict[str, list[Any]]


@pytest.fixture
def world(make_user: Callable[..., Any], tmp_path: Path) -> World:
    from sources.models import Chunk, Collection, Source

    users = {
        "alice": make_user("alice"),
        "bob": make_user("bob"),
        "carol": make_user("carol", staff=True),
        "root": make_user("root", superuser=True),
    }
    collections = {
        "alpha": Collection.objects.create(name="alpha"),
        "beta": Collection.objects.create(name="beta"),
        "handbook": Collection.objects.create(name="handbook", public=True),
    }
    collections["alpha"].readers.add(users["alice"], users["carol"])
    collections["beta"].readers.add(users["bob"])
    sources, chunks = {}, {}
    for name, coll, texts in (
        ("alpha.md", "alpha", ["# Alpha\n\nAlpha power is 24 V.", "Alpha bus has 8 ports."]),
        ("beta.txt", "beta", ["Beta secret: the launch is in May."]),
        ("handbook.md", "handbook", ["Everyone may read the handbook."]),
    ):
        root = tmp_path / "kb" / coll
        root.mkdir(parents=True)
        (root / name).write_text("\n\n".join(texts))
        source = Source.objects.create(
            collection=collections[coll],
            root=str(root),
            path=name,
            title=name,
            kind=name.rsplit(".", 1)[1],
            status=Source.Status.INGESTED,
            chunk_count=len(texts),
            ingested_at=timezone.now(),
        )
        sources[coll] = source
        chunks[coll] = [
            Chunk.objects.create(
                source=source,
                ordinal=i,
                text=t,
                heading="Alpha" if i == 0 else "",
                line_start=1 + 2 * i,
                line_end=1 + 2 * i,
                token_count=8,
            )
            for i, t in enumerate(texts)
        ]
    return World(users, collections, sources, chunks)


CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]


@pytest.fixture
def browser_page(live_server: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A Playwright page in Debian's chromium (``make browser``), against pytest-django's live server.

    Without chromium the test is skipped, except under CI=true, where it fails.
    """
    chromium, sync_playwright = chromium_or_skip()
    # Playwright's sync API runs an event loop in this thread; Django refuses ORM
    # calls from a thread with a running loop unless told it is safe, as it is here.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with chromium_page(chromium, sync_playwright) as page:
        yield page


def chromium_or_skip() -> tuple[str, Any]:
    """Debian's chromium and Playwright's ``sync_playwright``; the test is skipped (failed under CI=true)
    when either is missing."""
    import os
    import shutil

    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        sync_playwright = None
    missing = (
        "chromium is not installed (run `make browser`)"
        if not os.path.exists(chromium)
        else "the playwright package is not installed"
        if sync_playwright is None
        else ""
    )
    if missing:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"browser test cannot run: {missing}")
        pytest.skip(f"browser test skipped: {missing}")
    return chromium, sync_playwright


@contextmanager
def chromium_page(chromium: str, sync_playwright: Any, **context_options: Any) -> Iterator[Any]:
    """A page in a fresh headless chromium; closed on exit."""
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1280, "height": 860}, **context_options)
        page = context.new_page()
        page.set_default_timeout(30_000)
        try:
            yield page
        finally:
            context.close()
            browser.close()


def login(user: Any) -> Any:
    """A test client signed in as ``user``."""
    from django.test import Client

    client = Client()
    client.force_login(user)
    return client


def record_query(user: Any, **fields: Any) -> Any:
    """A QueryLog row with plausible defaults, written the only allowed way."""
    import uuid

    from generation.audit_chain import query_record

    values = {
        "run_id": uuid.uuid4().hex,
        "user": user,
        "question": "q?",
        "mode": "hybrid",
        "answer_class": "normal",
        "answer": "An answer.",
        "timings": {"total": 100.0},
    }
    return query_record(**{**values, **fields})
