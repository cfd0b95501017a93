"""Chunking settings recorded per source: a change of ``ingest.chunk_tokens``,
``ingest.chunk_overlap_tokens`` or ``embedding.context_model`` re-chunks exactly the
files built with other settings, says why, and ``foundry check`` reports the drift."""

from __future__ import annotations

import importlib
import json
import shlex
from collections.abc import Callable
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from core import llm
from sources import vectorstore
from sources.models import Chunk, IngestJob, Source
from sources.services import ingest, ingest_jobs, prepare
from sources.services.chunking_settings import (
    chunking_changes_text,
    chunking_configured,
    chunking_encode,
    chunking_parse,
    rechunk_reason,
)
from sources.services.integrity import index_check
from tests.conftest import ScriptedLLM, make_pdf, make_table_pdf
from tests.sources.test_ingest import index_agrees
from tests.sources.test_ingest_jobs import running_job

DEFAULTS = chunking_encode(chunk_tokens=200, chunk_overlap_tokens=0, context_model="none", window_sentences=2)
SMALL = chunking_encode(chunk_tokens=64, chunk_overlap_tokens=0, context_model="none", window_sentences=2)


def write_docs(kb: Path) -> None:
    """Two files long enough that 200 and 64 token chunks differ in number, one that fits either way."""
    for name, topic in (("pumps.md", "pump"), ("valves.md", "valve")):
        # Paragraphs of about 80 word pieces: split into sentences at 64, packed whole at 200.
        paragraphs = [
            " ".join(
                f"The {topic} unit {i}.{j} reports pressure, flow and temperature to the gateway." for j in range(5)
            )
            for i in range(4)
        ]
        (kb / name).write_text(f"# {topic.title()}s\n\n## Operation\n\n" + "\n\n".join(paragraphs) + "\n")
    (kb / "short.txt").write_text("Firmware 2.4.1 fixes the alarm hysteresis bug.\n")


def chunk_counts() -> dict[str, int]:
    return {s.path: Chunk.objects.filter(source=s).count() for s in Source.objects.all()}


def reasons(report: ingest.IngestReport) -> dict[str, tuple[str, str]]:
    return {f.path: (f.status, f.reason) for f in report.files}


@pytest.fixture
def count_embeds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Texts sent to the embedder, per call."""
    calls: list[int] = []
    real = llm.embed

    def counting(texts: list[str], **kwargs: Any) -> list[list[float]]:
        calls.append(len(texts))
        return real(texts, **kwargs)

    monkeypatch.setattr(llm, "embed", counting)
    return calls


# --------------------------------------------------------------------------- the string (no database)


def test_encoding_is_canonical_and_parses_back() -> None:
    value = chunking_encode(
        chunk_tokens=128, chunk_overlap_tokens=16, context_model="openai/gpt-4o-mini", window_sentences=3
    )
    assert value == "chunk_tokens=128 chunk_overlap_tokens=16 context_model=openai/gpt-4o-mini window_sentences=3"
    assert chunking_parse(value) == {
        "chunk_tokens": "128",
        "chunk_overlap_tokens": "16",
        "context_model": "openai/gpt-4o-mini",
        "window_sentences": "3",
    }
    assert chunking_parse("") == {}


def test_changes_name_only_the_keys_that_differ() -> None:
    new = chunking_encode(chunk_tokens=128, chunk_overlap_tokens=0, context_model="scripted/ctx", window_sentences=2)
    assert chunking_changes_text(DEFAULTS, new) == "chunk_tokens 200 → 128, context_model none → scripted/ctx"
    assert chunking_changes_text(DEFAULTS, DEFAULTS) == ""
    assert chunking_changes_text("", SMALL).startswith("chunk_tokens unknown → 64")


def test_rechunk_reason() -> None:
    assert rechunk_reason(previous=None, prepared=SMALL, configured=SMALL) == ""  # a new or changed file
    assert rechunk_reason(previous=SMALL, prepared=SMALL, configured=SMALL) == ""  # e.g. a repaired index
    assert rechunk_reason(previous=DEFAULTS, prepared=SMALL, configured=SMALL) == (
        "re-chunked: chunking settings changed (chunk_tokens 200 → 64)"
    )
    mismatch = rechunk_reason(previous=None, prepared=SMALL, configured=DEFAULTS)
    assert "prepared with chunk_tokens 64 but this foundry.yaml sets chunk_tokens 200" in mismatch


def test_migration_backfill_is_the_string_of_the_old_defaults() -> None:
    """Sources recorded before windows existed have none: the next ingest re-embeds them, and says why."""
    migration = importlib.import_module("sources.migrations.0003_source_chunking")
    old = chunking_encode(chunk_tokens=200, chunk_overlap_tokens=0, context_model="none", window_sentences=0)
    assert migration.BEFORE_RECORDED == old.removesuffix(" window_sentences=0")
    assert chunking_changes_text(migration.BEFORE_RECORDED, DEFAULTS) == "window_sentences unknown → 2"


# --------------------------------------------------------------------------- ingest


@pytest.mark.django_db
def test_changed_chunk_tokens_rechunks_every_file_and_says_why(kb: Path, foundry_config: Callable[..., Any]) -> None:
    write_docs(kb)
    ingest_jobs.knowledge_base_ingest(target=kb)
    before = chunk_counts()
    old_ids = set(Chunk.objects.values_list("id", flat=True))
    assert set(Source.objects.values_list("chunking", flat=True)) == {DEFAULTS}

    foundry_config(ingest={"chunk_tokens": 64})
    out = StringIO()
    call_command("foundry", "ingest", str(kb), stdout=out)
    why = "re-chunked: chunking settings changed (chunk_tokens 200 → 64)"
    report = ingest_jobs.ingest_job_report(IngestJob.objects.first())  # the latest job
    assert reasons(report) == {path: ("ingested", why) for path in before}
    assert why in out.getvalue() and "unchanged      0" in out.getvalue()
    after = chunk_counts()
    assert after["pumps.md"] > before["pumps.md"] and after["valves.md"] > before["valves.md"]
    assert after["short.txt"] == before["short.txt"] == 1
    assert not old_ids & set(Chunk.objects.values_list("id", flat=True))
    assert set(Source.objects.values_list("chunking", flat=True)) == {SMALL}
    assert {s.path: s.chunk_count for s in Source.objects.all()} == after
    index_agrees()


@pytest.mark.django_db
def test_same_settings_are_unchanged_and_embed_nothing(
    kb: Path, foundry_config: Callable[..., Any], count_embeds: list[int]
) -> None:
    foundry_config(ingest={"chunk_tokens": 64, "chunk_overlap_tokens": 16})
    write_docs(kb)
    first = ingest_jobs.knowledge_base_ingest(target=kb)
    assert first.count("ingested") == 3 and all(f.reason == "" for f in first.files)
    embedded = len(count_embeds)
    again = ingest_jobs.knowledge_base_ingest(target=kb)
    assert reasons(again) == {path: ("unchanged", "") for path in chunk_counts()}
    assert len(count_embeds) == embedded
    index_agrees()


@pytest.mark.django_db
def test_changed_overlap_rechunks(kb: Path, foundry_config: Callable[..., Any]) -> None:
    foundry_config(ingest={"chunk_tokens": 64})
    write_docs(kb)
    ingest_jobs.knowledge_base_ingest(target=kb)
    texts = list(Chunk.objects.filter(source__path="pumps.md").values_list("text", flat=True))
    foundry_config(ingest={"chunk_tokens": 64, "chunk_overlap_tokens": 20})
    report = reasons(ingest_jobs.knowledge_base_ingest(target=kb))
    assert report["pumps.md"] == ("ingested", "re-chunked: chunking settings changed (chunk_overlap_tokens 0 → 20)")
    overlapped = list(Chunk.objects.filter(source__path="pumps.md").values_list("text", flat=True))
    # With overlap a chunk repeats the last sentence of the one before it.
    assert overlapped != texts and overlapped[1].startswith(overlapped[0].split(". ")[-1])
    index_agrees()


@pytest.mark.django_db
def test_changed_context_model_rechunks_with_and_without_prefixes(
    kb: Path, foundry_config: Callable[..., Any], scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.reply = lambda messages: "About the alarm firmware."
    (kb / "notes.txt").write_text("Firmware 2.4.1 fixes the alarm hysteresis bug.\n")
    ingest_jobs.knowledge_base_ingest(target=kb)
    assert "About the alarm" not in Chunk.objects.get().context

    foundry_config(embedding={"context_model": "scripted/ctx"})
    report = reasons(ingest_jobs.knowledge_base_ingest(target=kb))
    assert report == {
        "notes.txt": ("ingested", "re-chunked: chunking settings changed (context_model none → scripted/ctx)")
    }
    assert "About the alarm firmware." in Chunk.objects.get().context and len(scripted_llm.calls) == 1
    assert reasons(ingest_jobs.knowledge_base_ingest(target=kb)) == {"notes.txt": ("unchanged", "")}
    assert len(scripted_llm.calls) == 1

    foundry_config(embedding={"context_model": "none"})
    report = reasons(ingest_jobs.knowledge_base_ingest(target=kb))
    assert report["notes.txt"][1].endswith("(context_model scripted/ctx → none)")
    assert "About the alarm" not in Chunk.objects.get().context
    index_agrees()


@pytest.mark.django_db
def test_changed_file_and_settings_is_not_called_a_rechunk(kb: Path, foundry_config: Callable[..., Any]) -> None:
    (kb / "notes.txt").write_text("Firmware 2.4.1 fixes the alarm hysteresis bug.\n")
    ingest_jobs.knowledge_base_ingest(target=kb)
    (kb / "notes.txt").write_text("Firmware 2.5.0 adds MQTT over TLS.\n")
    foundry_config(ingest={"chunk_tokens": 64})
    assert reasons(ingest_jobs.knowledge_base_ingest(target=kb)) == {"notes.txt": ("ingested", "")}
    assert Source.objects.get().chunking == SMALL


# --------------------------------------------------------------------------- split prepare / store


@pytest.mark.django_db
def test_split_prepare_and_store_record_what_prepare_used(kb: Path, foundry_config: Callable[..., Any]) -> None:
    """A db worker whose foundry.yaml differs from the compute worker's stores the prepared chunks as
    they are, records the settings they were built with (not its own) and says so; the next ingest
    re-chunks them with its settings."""
    write_docs(kb)
    job = running_job(kb)
    foundry_config(ingest={"chunk_tokens": 64})  # the compute worker's foundry.yaml
    payload = json.loads(
        json.dumps(ingest_jobs.ingest_job_file_prepare(root=str(kb), rel="pumps.md", job_id=job.pk))
    )  # through the broker
    assert payload["chunking"] == SMALL
    foundry_config(ingest={"chunk_tokens": 200})  # the db worker's foundry.yaml
    stored = ingest_jobs.ingest_job_file_store(job_id=job.pk, rel="pumps.md", payload=payload)
    assert stored is not None and stored.status == "ingested"
    assert "prepared with chunk_tokens 64 but this foundry.yaml sets chunk_tokens 200" in stored.reason
    job.refresh_from_db()
    assert job.results[0]["reason"] == stored.reason
    source = Source.objects.get(path="pumps.md")
    assert source.chunking == SMALL and source.chunk_count == stored.chunks

    rerun = reasons(ingest_jobs.knowledge_base_ingest(target=kb))
    assert rerun["pumps.md"] == ("ingested", "re-chunked: chunking settings changed (chunk_tokens 64 → 200)")
    source.refresh_from_db()
    assert source.chunking == DEFAULTS and source.chunk_count < stored.chunks
    index_agrees()


@pytest.mark.django_db
def test_payload_without_settings_is_stored_and_rechunked_next_time(kb: Path) -> None:
    """A payload from a worker that predates the field: stored (unknown settings), redone by the next ingest."""
    (kb / "notes.txt").write_text("Firmware 2.4.1 fixes the alarm hysteresis bug.\n")
    job = ingest_jobs.ingest_job_create(target=kb)
    payload = prepare.source_prepare(root=str(kb), rel="notes.txt")
    del payload["chunking"]
    stored = ingest.source_store_prepared(
        root=str(kb), rel="notes.txt", collection_id=job.collection_id, payload=payload
    )
    assert stored.status == "ingested" and "does not record its chunking settings" in stored.reason
    assert Source.objects.get().chunking == ""
    rerun = reasons(ingest_jobs.knowledge_base_ingest(target=kb))
    assert rerun["notes.txt"][0] == "ingested" and "chunk_tokens unknown → 200" in rerun["notes.txt"][1]
    assert Source.objects.get().chunking == DEFAULTS


# --------------------------------------------------------------------------- foundry check / status


@pytest.mark.django_db
def test_check_warns_about_drift_with_the_command_that_fixes_it(kb: Path, foundry_config: Callable[..., Any]) -> None:
    write_docs(kb)
    (kb / "private").mkdir()
    (kb / "private" / "salaries.txt").write_text("Salary bands are reviewed in March.\n")
    ingest_jobs.knowledge_base_ingest(target=kb, collection="manuals", include_private=True)
    assert index_check().warnings == []

    foundry_config(ingest={"chunk_tokens": 64})
    command = f"foundry ingest {shlex.quote(str(kb))} --collection manuals --include-private"
    report = index_check()
    assert report.ok and len(report.warnings) == 1
    assert (
        "4 sources were chunked with other settings than foundry.yaml sets: chunk_tokens 200 → 64 (4 sources)"
        in report.warnings[0]
    )
    assert f"\n  {command}\n" in report.warnings[0] and report.warnings[0].endswith(
        "set those keys back in foundry.yaml."
    )
    out = StringIO()
    call_command("foundry", "check", stdout=out)  # a warning: exit status 0
    assert "WARNING: 4 sources were chunked" in out.getvalue() and out.getvalue().endswith("OK\n")
    status = StringIO()
    call_command("foundry", "status", stdout=status)
    assert "WARNING: 4 sources were chunked" in status.getvalue()

    argv = shlex.split(command)
    call_command("foundry", *argv[1:], stdout=StringIO())
    assert index_check().warnings == [] and set(Source.objects.values_list("chunking", flat=True)) == {SMALL}


@pytest.mark.django_db
def test_check_leaves_sources_of_another_model_to_the_model_problem(kb: Path) -> None:
    (kb / "notes.txt").write_text("Firmware 2.4.1 fixes the alarm hysteresis bug.\n")
    ingest_jobs.knowledge_base_ingest(target=kb)
    Source.objects.update(embedding_model="local/other-model", chunking=SMALL)
    report = index_check()
    assert report.warnings == [] and any("local/other-model" in p for p in report.problems)


# --------------------------------------------------------------------------- migration


def vectors_dropped() -> None:
    """A transactional test's flush leaves earlier tests' vectors in vec0: a migration test starts without them."""
    with connection.cursor() as cur:
        for table in vectorstore.all_tables() + vectorstore.all_tables(kind="windows"):
            cur.execute(f"DROP TABLE {table}")


def sources_migrate(to: str = "") -> None:
    """Migrate the sources app back to migration ``to``; without it, apply every migration (an upgrade)."""
    executor = MigrationExecutor(connection)
    executor.migrate([("sources", to)] if to else executor.loader.graph.leaf_nodes())


@pytest.mark.django_db(transaction=True)
def test_migration_backfills_ingested_rows_and_keeps_the_fts_triggers(kb: Path) -> None:
    vectors_dropped()
    (kb / "notes.txt").write_text("Firmware 2.4.1 fixes the alarm hysteresis bug.\n")
    ingest_jobs.knowledge_base_ingest(target=kb)
    Source.objects.create(collection=Source.objects.get().collection, root=str(kb), path="never.txt")
    sources_migrate("0002_ingest_job")
    try:
        with connection.cursor() as cur:
            cur.execute("SELECT name FROM pragma_table_info('sources_source') WHERE name = 'chunking'")
            assert cur.fetchone() is None
    finally:
        sources_migrate()
    before = importlib.import_module("sources.migrations.0003_source_chunking").BEFORE_RECORDED
    assert dict(Source.objects.values_list("path", "chunking")) == {"notes.txt": before, "never.txt": ""}
    with connection.cursor() as cur:
        cur.execute("SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'chunks_fts_%' ORDER BY 1")
        assert [r[0] for r in cur.fetchall()] == [
            "chunks_fts_delete",
            "chunks_fts_insert",
            "chunks_fts_title",
            "chunks_fts_update",
        ]
    # The backfilled row counts as built with the defaults of its time, before sentence windows:
    # the next ingest re-embeds it for them, and says so; the one after finds it unchanged.
    assert chunking_configured() == DEFAULTS
    assert reasons(ingest_jobs.knowledge_base_ingest(target=kb))["notes.txt"] == (
        "ingested",
        "re-chunked: chunking settings changed (window_sentences unknown → 2)",
    )
    assert reasons(ingest_jobs.knowledge_base_ingest(target=kb))["notes.txt"] == ("unchanged", "")
    Source.objects.filter(path="notes.txt").update(title="Renamed")  # the title trigger still works
    with connection.cursor() as cur:
        cur.execute("SELECT title FROM chunks_fts")
        assert [r[0] for r in cur.fetchall()] == ["Renamed"]
    index_agrees()


@pytest.mark.django_db(transaction=True)
def test_migration_0004_makes_the_next_ingest_read_json_sources_again(kb: Path) -> None:
    vectors_dropped()
    (kb / "notes.txt").write_text("Firmware 2.4.1 fixes the alarm hysteresis bug.\n")
    (kb / "spec.json").write_text('{"bus": {"termination": "120 Ohm"}}')
    ingest_jobs.knowledge_base_ingest(target=kb)
    sources_migrate("0003_source_chunking")
    sources_migrate()
    assert dict(Source.objects.values_list("path", "sha256"))["spec.json"] == ""
    assert {path: status for path, (status, _) in reasons(ingest_jobs.knowledge_base_ingest(target=kb)).items()} == {
        "notes.txt": "unchanged",
        "spec.json": "ingested",
    }
    assert reasons(ingest_jobs.knowledge_base_ingest(target=kb))["spec.json"] == ("unchanged", "")
    index_agrees()


@pytest.mark.django_db(transaction=True)
def test_migration_0010_makes_the_next_ingest_rechunk_sources_whose_pieces_lost_their_lines(kb: Path) -> None:
    vectors_dropped()
    items = [f"- Item {i}: the sensor {i} reports its pressure, flow and temperature readings." for i in range(40)]
    (kb / "list.md").write_text("# Sensors\n\n" + "\n".join(items) + "\n")
    (kb / "short.txt").write_text("Firmware 2.4.1 fixes the alarm hysteresis bug.\n")
    ingest_jobs.knowledge_base_ingest(target=kb)
    pieces = list(Chunk.objects.filter(source__path="list.md").order_by("ordinal"))
    assert len(pieces) > 1  # the list was cut, and each piece kept its items on their lines
    assert all(c.text.count("\n") == c.line_end - c.line_start for c in pieces)
    for chunk in pieces:  # as ingest stored a cut list before: its pieces joined with spaces
        Chunk.objects.filter(pk=chunk.pk).update(text=" ".join(chunk.text.split("\n")))
    sources_migrate("0009_source_names_per_collection")
    sources_migrate()
    recorded = dict(Source.objects.values_list("path", "chunking"))
    # 0020 marks it too: its joined pieces no longer map line by line, and have no line map.
    assert recorded == {"list.md": DEFAULTS + " split_text=joined line_map=none", "short.txt": DEFAULTS}
    (warning,) = index_check().warnings  # no foundry.yaml key to set back: only re-ingesting re-chunks them
    assert "split_text joined → verbatim, line_map none → kept (1 source)" in warning
    assert "foundry.yaml." not in warning
    assert reasons(ingest_jobs.knowledge_base_ingest(target=kb)) == {
        "list.md": (
            "ingested",
            "re-chunked: chunking settings changed (split_text joined → verbatim, line_map none → kept)",
        ),
        "short.txt": ("unchanged", ""),
    }
    assert [c.text for c in Chunk.objects.filter(source__path="list.md").order_by("ordinal")] == [
        c.text for c in pieces
    ]
    assert reasons(ingest_jobs.knowledge_base_ingest(target=kb))["list.md"] == ("unchanged", "")
    index_agrees()


LAYOUT = ("lines", "positions")
PDF_TEXT = ("pypdf", "pdfium")  # 0019 marks every PDF


def _chapter_headers_pdf(path: Path) -> None:
    """Chapter 1's running header stands on two pages only, the page's number at the foot of each."""
    pages = [(f"About {t}", f"The {t} comes first.\nThen {t} again.\nLast on {t}.") for t in ("power", "wiring")]
    pages += [(f"Part {n}", f"Step {n} comes first.\nThen step {n} again.\nLast of {n}.") for n in range(3, 7)]
    make_pdf(
        path,
        pages,
        header_line=lambda page: f"Chapter {1 if page <= 2 else 2}: {'Basics' if page <= 2 else 'Wiring'} {page}",
        footer_line="{page}",
    )


def _running_lines_pdf(path: Path) -> None:
    pages = [("1 Overview", "The gateway collects data.\nIt sends them on."), ("2 Power", "VCC is 5 V.\nIn: 24 V.")]
    make_pdf(path, pages, header_line="ACME Datasheet - Rev. 2", footer_line="Page {page} of 2")


@pytest.mark.parametrize(
    ("back_to", "write", "changed", "kept", "dropped"),
    [
        (  # 0011: running headers and footers left out (0013, 0017 and 0019 mark the PDF too)
            "0010_split_text",
            _running_lines_pdf,
            {
                "pdf_running": ("kept", "dropped"),
                "pdf_tables": ("lines", "cells"),
                "pdf_layout": LAYOUT,
                "pdf_text": PDF_TEXT,
            },
            "VCC is 5 V.",
            ("Datasheet", "Page"),
        ),
        (  # 0013: tables in cells (0014 and 0015 mark the PDF too: its chunks hold rows; 0017 and 0019 as a PDF)
            "0012_txt_title",
            make_table_pdf,
            {
                "pdf_tables": ("lines", "cells"),
                "table_rows": ("cut", "whole"),
                "table_windows": ("whole", "rows"),
                "pdf_layout": LAYOUT,
                "pdf_text": PDF_TEXT,
            },
            "Power consumption | - | 4.0 | W",
            ("Power consumption - 4.0 W",),
        ),
        (  # 0017: a short chapter's running header and the page numbers left out
            "0016_chunk_language",
            _chapter_headers_pdf,
            {"pdf_layout": LAYOUT, "pdf_text": PDF_TEXT},
            "Then wiring again.",
            ("Chapter 1", "Basics"),
        ),
    ],
)
@pytest.mark.django_db(transaction=True)
def test_migrations_0011_0013_and_0017_make_the_next_ingest_read_pdfs_anew(
    kb: Path, back_to: str, write: Callable[[Path], object], changed: dict, kept: str, dropped: tuple[str, ...]
) -> None:
    vectors_dropped()
    write(kb / "sheet.pdf")
    (kb / "short.txt").write_text("Firmware 2.4.1 fixes the alarm hysteresis bug.\n")
    ingest_jobs.knowledge_base_ingest(target=kb)
    sources_migrate(back_to)
    sources_migrate()
    recorded = dict(Source.objects.values_list("path", "chunking"))
    marks = "".join(f" {key}={old}" for key, (old, _) in changed.items())
    assert recorded == {"sheet.pdf": DEFAULTS + marks, "short.txt": DEFAULTS}
    (warning,) = index_check().warnings
    changes = ", ".join(f"{key} {old} → {new}" for key, (old, new) in changed.items())
    assert f"{changes} (1 source)" in warning and "foundry.yaml." not in warning
    assert reasons(ingest_jobs.knowledge_base_ingest(target=kb)) == {
        "sheet.pdf": ("ingested", f"re-chunked: chunking settings changed ({changes})"),
        "short.txt": ("unchanged", ""),
    }
    texts = " ".join(Chunk.objects.filter(source__path="sheet.pdf").values_list("text", flat=True))
    assert kept in texts and not any(text in texts for text in dropped)
    assert reasons(ingest_jobs.knowledge_base_ingest(target=kb))["sheet.pdf"] == ("unchanged", "")
    index_agrees()


@pytest.mark.django_db(transaction=True)
def test_migrations_0014_and_0015_make_the_next_ingest_keep_table_rows_whole_and_window_them(kb: Path) -> None:
    vectors_dropped()
    rows = ["| Sensor | Address | Value |"]
    rows += [f"| Sensor {n} | address {n}, polled every 60 s | last value {n}.5 mA |" for n in range(1, 41)]
    (kb / "bus.md").write_text("# Bus\n\nEach sensor has one row.\n" + "\n".join(rows) + "\n")
    (kb / "sheet.csv").write_text("Sensor,Address\nS1,1\nS2,2\n")  # a row a block: never cut
    (kb / "short.txt").write_text("Firmware 2.4.1 fixes the alarm hysteresis bug.\n")
    ingest_jobs.knowledge_base_ingest(target=kb)
    stored = [c.text for c in Chunk.objects.filter(source__path="bus.md").order_by("ordinal")]
    assert stored[0] == "Each sensor has one row." and stored[1].startswith(rows[0])  # the table opens a chunk
    assert len(stored) > 2 and all(line in rows for text in stored[1:] for line in text.split("\n"))
    sources_migrate("0013_pdf_tables")
    sources_migrate()
    recorded = dict(Source.objects.values_list("path", "chunking"))
    assert recorded == {
        "bus.md": DEFAULTS + " table_rows=cut table_windows=whole",
        # 0015: its rows were one sentence of its windows; 0020: downgraded past 0020, its chunks lost their line maps
        "sheet.csv": DEFAULTS + " table_windows=whole line_map=none",
        "short.txt": DEFAULTS,
    }
    (warning,) = index_check().warnings
    assert "table_rows cut → whole, table_windows whole → rows (1 source)" in warning  # bus.md
    assert "table_windows whole → rows, line_map none → kept (1 source)" in warning  # and sheet.csv
    assert reasons(ingest_jobs.knowledge_base_ingest(target=kb)) == {
        "bus.md": (
            "ingested",
            "re-chunked: chunking settings changed (table_rows cut → whole, table_windows whole → rows)",
        ),
        "sheet.csv": (
            "ingested",
            "re-chunked: chunking settings changed (table_windows whole → rows, line_map none → kept)",
        ),
        "short.txt": ("unchanged", ""),
    }
    assert [c.text for c in Chunk.objects.filter(source__path="bus.md").order_by("ordinal")] == stored
    assert reasons(ingest_jobs.knowledge_base_ingest(target=kb))["bus.md"] == ("unchanged", "")
    index_agrees()


@pytest.mark.django_db(transaction=True)
def test_migration_0012_makes_the_next_ingest_title_text_files_by_their_first_line(kb: Path) -> None:
    vectors_dropped()
    (kb / "release-notes.txt").write_text("ACME Gateway - Firmware Release Notes\n\nVersion 2.4.1\nFixed: a bug.\n")
    (kb / "guide.md").write_text("# Guide\n\nMount the gateway.\n")
    (kb / "notes.txt").write_text("Firmware 2.4.1 fixes the alarm hysteresis bug.\n")  # titled by its name still
    ingest_jobs.knowledge_base_ingest(target=kb)
    sources_migrate("0011_pdf_running_lines")
    Source.objects.filter(path="release-notes.txt").update(title="release-notes")  # as ingest titled it before
    sources_migrate()
    recorded = dict(Source.objects.values_list("path", "chunking"))
    assert recorded == {"release-notes.txt": DEFAULTS + " txt_title=name", "guide.md": DEFAULTS, "notes.txt": DEFAULTS}
    (warning,) = index_check().warnings
    assert "txt_title name → first_line (1 source)" in warning
    assert reasons(ingest_jobs.knowledge_base_ingest(target=kb)) == {
        "release-notes.txt": ("ingested", "re-chunked: chunking settings changed (txt_title name → first_line)"),
        "guide.md": ("unchanged", ""),
        "notes.txt": ("unchanged", ""),
    }
    assert Source.objects.get(path="release-notes.txt").title == "ACME Gateway - Firmware Release Notes"
    assert reasons(ingest_jobs.knowledge_base_ingest(target=kb))["release-notes.txt"] == ("unchanged", "")
    index_agrees()


@pytest.mark.django_db(transaction=True)
def test_migration_0006_makes_the_next_ingest_rechunk_json_sources_with_labelled_values(kb: Path) -> None:
    vectors_dropped()
    (kb / "notes.txt").write_text("Firmware 2.4.1 fixes the alarm hysteresis bug.\n")
    (kb / "spec.json").write_text('{"network": {"ip_address": "192.168.10.50"}}')
    ingest_jobs.knowledge_base_ingest(target=kb)
    sources_migrate("0005_source_cited_name")
    with connection.cursor() as cur:
        cur.execute("SELECT name FROM pragma_table_info('sources_chunk') WHERE name = 'ocr_confidence'")
        assert cur.fetchone() is None
    sources_migrate()
    recorded = dict(Source.objects.values_list("path", "chunking"))
    assert recorded == {"notes.txt": DEFAULTS, "spec.json": DEFAULTS + " json_values=unlabelled"}
    assert reasons(ingest_jobs.knowledge_base_ingest(target=kb)) == {
        "notes.txt": ("unchanged", ""),
        "spec.json": ("ingested", "re-chunked: chunking settings changed (json_values unlabelled → labelled)"),
    }
    assert Chunk.objects.get(source__path="spec.json").text == "network.ip_address: 192.168.10.50"
    assert reasons(ingest_jobs.knowledge_base_ingest(target=kb))["spec.json"] == ("unchanged", "")
    with connection.cursor() as cur:
        cur.execute("SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'chunks_fts_%' ORDER BY 1")
        assert [r[0] for r in cur.fetchall()] == [
            "chunks_fts_delete",
            "chunks_fts_insert",
            "chunks_fts_title",
            "chunks_fts_update",
        ]
    index_agrees()


FRAME = "# " + "=" * 76


@pytest.mark.django_db(transaction=True)
def test_migration_0018_makes_the_next_ingest_title_framed_files_by_their_heading(kb: Path) -> None:
    vectors_dropped()
    framed = f"{FRAME}\n# Pump Controller Requirements\n{FRAME}\n\n## Objective\n\nThe pump must stop on a dry run.\n"
    (kb / "framed.txt").write_text(framed)
    (kb / "framed.md").write_text(framed)
    (kb / "notes.txt").write_text("Firmware 2.4.1 fixes the alarm hysteresis bug.\n")
    ingest_jobs.knowledge_base_ingest(target=kb)
    titles = dict(Source.objects.values_list("path", "title"))
    assert titles == {
        "framed.txt": "Pump Controller Requirements",
        "framed.md": "Pump Controller Requirements",
        "notes.txt": "notes",
    }
    assert not any("==" in h for h in Chunk.objects.values_list("heading", flat=True))
    sources_migrate("0017_pdf_furniture_positions")
    # As ingest titled them before: the Markdown file by its rule (and every heading under it), the text by its name.
    Source.objects.filter(path="framed.md").update(title="=" * 76)
    Chunk.objects.filter(source__path="framed.md").update(heading="=" * 76)
    Source.objects.filter(path="framed.txt").update(title="framed")
    sources_migrate()
    recorded = dict(Source.objects.values_list("path", "chunking"))
    marked = DEFAULTS + " title_decoration=kept"
    assert recorded == {"framed.txt": marked, "framed.md": marked, "notes.txt": DEFAULTS}
    (warning,) = index_check().warnings
    assert "title_decoration kept → skipped (2 sources)" in warning
    changed = ("ingested", "re-chunked: chunking settings changed (title_decoration kept → skipped)")
    assert reasons(ingest_jobs.knowledge_base_ingest(target=kb)) == {
        "framed.txt": changed,
        "framed.md": changed,
        "notes.txt": ("unchanged", ""),
    }
    assert dict(Source.objects.values_list("path", "title")) == titles
    assert not any("==" in h for h in Chunk.objects.values_list("heading", flat=True))
    assert reasons(ingest_jobs.knowledge_base_ingest(target=kb))["framed.md"] == ("unchanged", "")
    index_agrees()


@pytest.mark.django_db(transaction=True)
def test_migration_0019_makes_the_next_ingest_read_documents_anew(kb: Path) -> None:
    from tests.sources.office_files import HTML, make_docx

    vectors_dropped()
    make_pdf(kb / "manual.pdf", [("1 Pump", "The pump stops on a dry run.")])
    make_docx(kb / "manual.docx")
    (kb / "valves.html").write_text(HTML)
    (kb / "notes.txt").write_text("Firmware 2.4.1 fixes the alarm hysteresis bug.\n")
    ingest_jobs.knowledge_base_ingest(target=kb)
    sources_migrate("0018_decoration_titles")
    sources_migrate()
    recorded = dict(Source.objects.values_list("path", "chunking"))
    assert recorded["notes.txt"] == DEFAULTS
    # downgraded past 0020 too: the chunks that needed a line map lost it
    assert recorded["manual.docx"] == DEFAULTS + " structure=flat line_map=none"
    assert recorded["valves.html"] == DEFAULTS + " structure=flat line_map=none html_lists=bare"  # and past 0023
    assert recorded["manual.pdf"] == DEFAULTS + " pdf_text=pypdf"
    report = reasons(ingest_jobs.knowledge_base_ingest(target=kb))
    assert report["manual.docx"] == (
        "ingested",
        "re-chunked: chunking settings changed (structure flat → drawn, line_map none → kept)",
    )
    assert report["valves.html"] == (
        "ingested",
        "re-chunked: chunking settings changed "
        "(structure flat → drawn, line_map none → kept, html_lists bare → numbered)",
    )
    assert report["manual.pdf"] == ("ingested", "re-chunked: chunking settings changed (pdf_text pypdf → pdfium)")
    assert report["notes.txt"] == ("unchanged", "")
    assert reasons(ingest_jobs.knowledge_base_ingest(target=kb))["manual.docx"] == ("unchanged", "")
    index_agrees()


@pytest.mark.django_db(transaction=True)
def test_migration_0024_makes_the_next_ingest_rechunk_lists_cut_by_a_chunk(kb: Path) -> None:
    vectors_dropped()
    steps = "".join(
        f"{n}. Check gauge number {n}: read the pressure at the shaft for at least one minute and write it into the "
        "log book of the pump, then go on with the next gauge.\n"
        for n in range(1, 13)
    )
    (kb / "procedure.md").write_text(f"# Checking the gauges\n\nTo check the gauges, do as follows:\n\n{steps}")
    (kb / "notes.txt").write_text("Firmware 2.4.1 fixes the alarm hysteresis bug.\n")
    ingest_jobs.knowledge_base_ingest(target=kb)
    chunks = list(Chunk.objects.filter(source__path="procedure.md").order_by("ordinal").values_list("text", flat=True))
    assert len(chunks) > 1
    assert all(text.startswith("To check the gauges, do as follows:") for text in chunks)
    sources_migrate("0023_html_lists")
    Chunk.objects.filter(source__path="procedure.md", ordinal=1).update(text=chunks[1].split("\n\n", 1)[1])
    sources_migrate()
    recorded = dict(Source.objects.values_list("path", "chunking"))
    assert recorded == {"procedure.md": DEFAULTS + " list_heads=cut", "notes.txt": DEFAULTS}
    assert reasons(ingest_jobs.knowledge_base_ingest(target=kb)) == {
        "procedure.md": ("ingested", "re-chunked: chunking settings changed (list_heads cut → repeated)"),
        "notes.txt": ("unchanged", ""),
    }
    assert (
        list(Chunk.objects.filter(source__path="procedure.md").order_by("ordinal").values_list("text", flat=True))
        == chunks
    )
    index_agrees()


@pytest.mark.django_db(transaction=True)
def test_migration_0025_makes_the_next_ingest_rechunk_lettered_lists(kb: Path) -> None:
    vectors_dropped()
    steps = "".join(f"{letter}) Check gauge {letter} and write its pressure into the log book.\n" for letter in "abcd")
    (kb / "procedure.md").write_text(f"# Checking the gauges\n\nTo check the gauges, do as follows:\n\n{steps}")
    (kb / "notes.txt").write_text("Firmware 2.4.1 fixes the alarm hysteresis bug. See b) of the notes.\n")
    ingest_jobs.knowledge_base_ingest(target=kb)
    sources_migrate("0024_list_heads")
    sources_migrate()
    marked = {"procedure.md": DEFAULTS + " letter_lists=prose", "notes.txt": DEFAULTS}
    assert dict(Source.objects.values_list("path", "chunking")) == marked
    sources_migrate("0024_list_heads")  # reversible
    assert dict(Source.objects.values_list("path", "chunking")) == {"procedure.md": DEFAULTS, "notes.txt": DEFAULTS}
    sources_migrate()
    assert reasons(ingest_jobs.knowledge_base_ingest(target=kb)) == {
        "procedure.md": ("ingested", "re-chunked: chunking settings changed (letter_lists prose → stepped)"),
        "notes.txt": ("unchanged", ""),
    }
    index_agrees()
