from __future__ import annotations

import json
from collections.abc import Callable
import os
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from sources import vectorstore
from generation.footnotes import footnote_text
from retrieval.services.retrieve import retrieve
from sources.models import Chunk, Source, SourceSummary, cited_names
from sources.services.chunking import chunk_windows
from sources.services.ingest import FileResult, IngestReport, source_delete
from sources.services.ingest_jobs import knowledge_base_ingest
from tests.conftest import ScriptedLLM, make_pdf

pytestmark = pytest.mark.django_db

MODEL = "local/all-minilm-l6-v2"


def index_agrees() -> None:
    """Chunk rows, FTS rows and vectors must always be the same set of ids, and each chunk
    has exactly the window vectors its text gives, in its first slots."""
    chunks = dict(Chunk.objects.values_list("id", "text"))
    with connection.cursor() as cur:
        fts_ids = vectorstore.fts_ids()
        vec_ids: set[int] = set()
        window_ids: set[int] = set()
        if vectorstore.table_exists(MODEL):
            cur.execute(f"SELECT chunk_id FROM {vectorstore.table_name(MODEL)}")
            vec_ids = {r[0] for r in cur.fetchall()}
            cur.execute(f"SELECT window_id FROM {vectorstore.windows_table_name(MODEL)}")
            window_ids = {r[0] for r in cur.fetchall()}
    assert set(chunks) == fts_ids == vec_ids
    expected = {
        vectorstore.window_id(cid, j)
        for cid, text in chunks.items()
        for j in range(len(chunk_windows(text, sentences=2, limit=vectorstore.WINDOW_SLOTS - 1)))
    }
    assert window_ids == expected


def write_kb(kb: Path) -> None:
    (kb / "manual.md").write_text("# Manual\n\n## Power\n\nThe gateway needs 24 V DC.\n\n## Bus\n\nUp to 8 sensors.\n")
    (kb / "notes.txt").write_text(
        "Firmware 2.4.1 fixes the alarm hysteresis bug. It also speeds up the boot. Older units need a reset first.\n"
    )
    (kb / "spec.json").write_text(json.dumps({"model": "AX-200", "electrical": {"vcc": "3.3 V"}}))
    make_pdf(kb / "sheet.pdf", [("1 General", "The AX-200 is a sensor gateway."), ("2 Power", "VCC = 5 V.")])


def test_ingest_all_types_then_idempotent(kb: Path) -> None:
    write_kb(kb)
    first = knowledge_base_ingest(target=kb)
    assert first.count("ingested") == 4 and first.count("failed") == 0
    assert Source.objects.filter(status="ingested").count() == 4
    pdf_chunk = Chunk.objects.get(source__path="sheet.pdf", text__contains="VCC")
    assert pdf_chunk.page_start == 2 and pdf_chunk.heading == "2 Power"
    assert vectorstore.window_count(MODEL) >= 2  # notes.txt: 3 sentences, 2 windows
    index_agrees()

    second = knowledge_base_ingest(target=kb)
    assert second.count("ingested") == 0 and second.count("unchanged") == 4
    index_agrees()


def test_changed_file_is_replaced_and_old_chunks_gone(kb: Path) -> None:
    write_kb(kb)
    knowledge_base_ingest(target=kb)
    old_ids = set(Chunk.objects.filter(source__path="notes.txt").values_list("id", flat=True))
    (kb / "notes.txt").write_text("Firmware 2.5.0 adds MQTT over TLS.\n")
    report = knowledge_base_ingest(target=kb)
    assert [f.path for f in report.files if f.status == "ingested"] == ["notes.txt"]
    assert report.count("unchanged") == 3
    new = Chunk.objects.filter(source__path="notes.txt")
    assert not old_ids & set(new.values_list("id", flat=True))
    assert "2.5.0" in new.get().text
    index_agrees()


def test_window_setting_change_re_embeds_and_zero_stores_no_windows(kb: Path, foundry_config) -> None:
    write_kb(kb)
    knowledge_base_ingest(target=kb)
    notes = Chunk.objects.get(source__path="notes.txt")
    first = notes.pk * vectorstore.WINDOW_SLOTS
    with connection.cursor() as cur:
        cur.execute(
            f"SELECT window_id FROM {vectorstore.windows_table_name(MODEL)} WHERE window_id > %s AND window_id < %s",
            [first, first + vectorstore.WINDOW_SLOTS],
        )
        assert sorted(r[0] for r in cur.fetchall()) == [first + 1, first + 2]
    foundry_config(ingest={"window_sentences": 0})
    report = knowledge_base_ingest(target=kb)
    assert report.count("ingested") == 4
    assert all("window_sentences 2 → 0" in f.reason for f in report.files)
    assert vectorstore.window_count(MODEL) == 0
    assert knowledge_base_ingest(target=kb).count("unchanged") == 4


def test_deleted_file_removed_with_chunks_and_vectors(kb: Path) -> None:
    write_kb(kb)
    knowledge_base_ingest(target=kb)
    (kb / "manual.md").unlink()
    report = knowledge_base_ingest(target=kb)
    assert [(f.path, f.status) for f in report.files if f.status == "removed"] == [("manual.md", "removed")]
    assert not Source.objects.filter(path="manual.md").exists()
    index_agrees()


def test_skips_with_reasons(kb: Path, foundry_config) -> None:
    foundry_config(ingest={"max_file_mb": 0.001})
    (kb / "big.txt").write_text("x " * 2000)
    (kb / "small.txt").write_text("A small note about pumps.")
    (kb / "tool.exe").write_bytes(b"MZ")
    (kb / "private").mkdir()
    (kb / "private" / "secret.txt").write_text("salary data")
    os.symlink("/etc/passwd", kb / "link.txt")
    report = {f.path: f for f in knowledge_base_ingest(target=kb).files}
    assert report["small.txt"].status == "ingested"
    assert report["big.txt"].status == "skipped" and "max_file_mb" in report["big.txt"].reason
    assert "unsupported file type '.exe'" in report["tool.exe"].reason
    assert "private/" in report["private/secret.txt"].reason
    assert "symbolic link" in report["link.txt"].reason
    assert not Chunk.objects.filter(text__contains="salary").exists()


def test_include_private_flag(kb: Path) -> None:
    (kb / "private").mkdir()
    (kb / "private" / "secret.txt").write_text("salary data for the team")
    report = knowledge_base_ingest(target=kb, include_private=True)
    assert report.files[0].status == "ingested"


def test_bad_files_reported_and_run_goes_on(kb: Path) -> None:
    (kb / "good.md").write_text("# Good\n\nUseful text about valves.\n")
    (kb / "empty.txt").write_bytes(b"")
    (kb / "bad.json").write_text("{not json")
    (kb / "latin.txt").write_bytes("caf\xe9 cr\xe8me".encode("latin-1"))
    (kb / "html.pdf").write_text("<html>nope</html>")
    report = {f.path: f for f in knowledge_base_ingest(target=kb).files}
    assert report["good.md"].status == "ingested"
    for name, reason in [
        ("empty.txt", "empty file"),
        ("bad.json", "invalid JSON"),
        ("latin.txt", "UTF-8"),
        ("html.pdf", "not a PDF"),
    ]:
        assert report[name].status == "failed" and reason in report[name].reason
        assert Source.objects.get(path=name).status == "failed"
    index_agrees()


def test_failed_update_keeps_previous_version(kb: Path) -> None:
    (kb / "spec.json").write_text('{"vcc": "3.3 V"}')
    knowledge_base_ingest(target=kb)
    (kb / "spec.json").write_text('{"vcc": ')
    report = knowledge_base_ingest(target=kb)
    assert report.files[0].status == "failed"
    source = Source.objects.get(path="spec.json")
    assert "previously ingested version stays indexed" in source.reason
    assert Chunk.objects.filter(source=source).count() == 1
    index_agrees()


def test_chunks_fit_embedder_input_limit(kb: Path) -> None:
    from core import llm

    long_para = " ".join(f"The pump station {i} reports pressure and flow to the gateway." for i in range(300))
    (kb / "long.md").write_text(f"# Long\n\n## Section with a long heading name\n\n{long_para}\n")
    knowledge_base_ingest(target=kb)
    count = llm.embedding_token_counter(MODEL)
    assert count is not None
    chunks = list(Chunk.objects.all())
    assert len(chunks) > 5
    for chunk in chunks:
        embedded = f"{chunk.context}\n\n{chunk.text}"
        assert count(embedded) + 2 <= 256  # with [CLS] and [SEP]


def test_summary_keeps_what_the_source_supports_and_prefix_uses_configured_llm(
    kb: Path, foundry_config, scripted_llm: ScriptedLLM
) -> None:
    foundry_config(ingest={"summary_model": "scripted/summariser"}, embedding={"context_model": "scripted/ctx"})
    summary = "Valve V1 opens at 2 bar. Valve V1 opens at 9 bar. It also cures headaches."
    scripted_llm.reply = lambda m: summary if "Summarise" in m[0]["content"] else "About valves."
    (kb / "note.md").write_text("# Valves\n\nValve V1 opens at 2 bar.\n")
    knowledge_base_ingest(target=kb)
    chunk = Chunk.objects.get()
    assert chunk.text == "Valve V1 opens at 2 bar."
    assert "About valves." in chunk.context
    # the summary keeps only what the source supports: not the changed value, not the invention
    assert SourceSummary.objects.get().text == "Valve V1 opens at 2 bar."
    assert len(scripted_llm.calls) == 2

    summary = "It also cures headaches."
    (kb / "note.md").write_text("# Valves\n\nValve V1 opens at 3 bar.\n")
    knowledge_base_ingest(target=kb)
    assert not SourceSummary.objects.exists()  # nothing supported: no background rather than a made-up one


def test_extractive_summary_quotes_the_lead_and_central_sentences_without_an_llm(
    kb: Path, foundry_config, scripted_llm: ScriptedLLM
) -> None:
    foundry_config(ingest={"summary_model": "extractive", "summary_max_tokens": 40})
    sentences = [
        "The V200 valve controls cooling water in the plant.",
        "It opens at 2 bar and closes at 1 bar.",
        "The valve body is made of bronze.",
        "Valves must be inspected every year.",
        "The cafeteria serves lunch at noon.",
        "The V200 valve has a manual override lever.",
        "Replace the valve seal every five years.",
    ]
    (kb / "valve.md").write_text("# V200 valve\n\n" + " ".join(sentences) + "\n")
    knowledge_base_ingest(target=kb)
    summary = SourceSummary.objects.get()
    assert summary.model == "extractive" and not scripted_llm.calls
    assert summary.text.startswith(sentences[0])  # the lead
    quoted = [s for s in sentences if s in summary.text]
    assert 2 <= len(quoted) <= 5 and len(summary.text.split()) <= 30  # about 40 tokens: 30 words
    assert summary.text == " ".join(quoted)  # verbatim, in source order
    assert "cafeteria" not in summary.text  # the least central sentence


def test_llm_failure_fails_the_source_only(kb: Path, foundry_config, scripted_llm: ScriptedLLM) -> None:
    foundry_config(ingest={"summary_model": "scripted/summariser"}, llm={"retries": 0})
    scripted_llm.reply = lambda m: ""
    (kb / "note.md").write_text("# Valves\n\nValve V1 opens at 2 bar.\n")
    report = knowledge_base_ingest(target=kb)
    assert report.files[0].status == "failed" and "empty completion" in report.files[0].reason
    assert not Chunk.objects.exists()
    index_agrees()


def test_source_delete_is_complete(kb: Path) -> None:
    write_kb(kb)
    knowledge_base_ingest(target=kb)
    source_delete(source_id=Source.objects.get(path="sheet.pdf").pk)
    assert Source.objects.count() == 3
    index_agrees()


def test_check_finds_damage_and_reingest_repairs(kb: Path) -> None:
    from sources.services.integrity import index_check

    write_kb(kb)
    knowledge_base_ingest(target=kb)
    assert index_check().ok
    victim = Chunk.objects.filter(source__path="manual.md").first()
    with connection.cursor() as cur:
        cur.execute(f"DELETE FROM {vectorstore.table_name(MODEL)} WHERE chunk_id = %s", [victim.pk])
    report = index_check()
    assert not report.ok and "1 chunk(s) missing from vec_chunks_local_all_minilm_l6_v2" in report.problems
    rerun = knowledge_base_ingest(target=kb)
    assert [f.path for f in rerun.files if f.status == "ingested"] == ["manual.md"]
    assert index_check().ok
    index_agrees()


def test_check_finds_window_vectors_of_no_chunk(kb: Path) -> None:
    from sources.services.integrity import index_check

    write_kb(kb)
    knowledge_base_ingest(target=kb)
    report = index_check()
    assert report.ok and report.counts["vec_windows_local_all_minilm_l6_v2"] == vectorstore.window_count(MODEL) > 0
    gone = Chunk.objects.order_by("-pk").first().pk + 1
    vectorstore.windows_insert(MODEL, [(vectorstore.window_id(gone, 0), 1, [0.1] * 384)])
    report = index_check()
    assert not report.ok and "1 orphan row(s) in vec_windows_local_all_minilm_l6_v2" in report.problems


def test_unexpected_parser_error_fails_only_that_file(kb: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from sources.services import extract as extract_module

    real = extract_module.extract_markdown

    def explode(text: str, *, fallback_title: str):  # noqa: ANN202
        if "boom" in text:
            raise KeyError("parser bug")
        return real(text, fallback_title=fallback_title)

    monkeypatch.setattr(extract_module, "extract_markdown", explode)
    (kb / "a.md").write_text("# A\n\nboom\n")
    (kb / "b.md").write_text("# B\n\nfine text about valves\n")
    report = {f.path: f for f in knowledge_base_ingest(target=kb).files}
    assert report["a.md"].status == "failed" and "KeyError" in report["a.md"].reason
    assert report["b.md"].status == "ingested"
    index_agrees()


@pytest.mark.parametrize(
    "where,reason", [("folder", "is a folder; give a file path"), ("missing/out.csv", "does not exist")]
)
def test_export_to_a_path_that_cannot_take_a_file_is_refused_leaving_nothing(
    kb: Path, tmp_path: Path, where: str, reason: str
) -> None:
    from io import StringIO

    from django.core.management import CommandError, call_command

    write_kb(kb)
    knowledge_base_ingest(target=kb)
    (tmp_path / "folder").mkdir()
    with pytest.raises(CommandError, match=f"output: .*{reason}"):
        call_command("foundry", "export", str(tmp_path / where), stdout=StringIO())
    assert not list(tmp_path.glob("*.part")) and not list((tmp_path / "folder").iterdir())


def test_ingest_into_another_collection_is_refused_unless_moved(kb: Path) -> None:
    from io import StringIO

    from django.core.management import CommandError, call_command

    from sources.models import Collection
    from sources.services.ingest import CollectionMoveRefused

    (kb / "manual.md").write_text("# Manual\n\nThe gateway needs 24 V DC.\n")
    (kb / "notes.txt").write_text("Firmware 2.4.1 fixes the alarm hysteresis bug.\n")
    knowledge_base_ingest(target=kb, collection="manuals")
    (kb / "new.txt").write_text("A file not ingested yet.\n")
    with pytest.raises(CollectionMoveRefused, match=r"2 in collection 'manuals' \(e\.g\. manual\.md\).*--move"):
        knowledge_base_ingest(target=kb, collection="archive")
    with pytest.raises(CommandError, match="would move them out of it and change who can read them"):
        call_command("foundry", "ingest", str(kb), "--collection", "archive", stdout=StringIO())
    # nothing changed: the sources stay where they were, no collection was created, new.txt waits
    assert set(Source.objects.values_list("path", "collection__name")) == {
        ("manual.md", "manuals"),
        ("notes.txt", "manuals"),
    }
    assert not Collection.objects.filter(name="archive").exists()

    call_command("foundry", "ingest", str(kb), "--collection", "archive", "--move", stdout=StringIO())
    assert set(Source.objects.values_list("path", "collection__name")) == {
        ("manual.md", "archive"),
        ("notes.txt", "archive"),
        ("new.txt", "archive"),
    }
    index_agrees()


@pytest.mark.parametrize("name", ["Bad Name!", "../up", "x" * 101])
def test_ingest_refuses_an_invalid_new_collection_name(kb: Path, name: str) -> None:
    from sources.models import Collection
    from sources.services.collections import CollectionError

    (kb / "manual.md").write_text("# Manual\n\nThe gateway needs 24 V DC.\n")
    with pytest.raises(CollectionError, match="invalid collection name|longer than 100"):
        knowledge_base_ingest(target=kb, collection=name)
    assert not Collection.objects.exists() and not Source.objects.exists()


def test_export_documents_csv(kb: Path, tmp_path: Path) -> None:
    import csv as csv_module
    import io

    from django.core.management import call_command

    write_kb(kb)
    knowledge_base_ingest(target=kb)
    out = tmp_path / "documents.csv"
    call_command("foundry", "export", str(out), stdout=io.StringIO())
    rows = list(csv_module.DictReader(out.open(encoding="utf-8")))
    assert list(rows[0]) == ["doc_id", "path", "title", "chunk_id", "chunk_text", "created_at", "updated_at"]
    assert len(rows) == Chunk.objects.count()
    assert any(r["path"] == "sheet.pdf" and "VCC" in r["chunk_text"] for r in rows)

    # a file whose new version fails keeps its last good chunks in the index, and so in the export
    (kb / "notes.txt").write_bytes(b"\xff\xfe broken")
    knowledge_base_ingest(target=kb)
    assert Source.objects.get(path="notes.txt").status == "failed"
    call_command("foundry", "export", str(out), stdout=io.StringIO())
    rows = list(csv_module.DictReader(out.open(encoding="utf-8")))
    assert len(rows) == Chunk.objects.count() and any(r["path"] == "notes.txt" for r in rows)
    from django.core.management import CommandError

    with pytest.raises(CommandError, match="--collection: no collection named 'nope'"):
        call_command("foundry", "export", str(out), "--collection", "nope", stdout=io.StringIO())


def test_cited_names_qualify_a_path_only_while_another_folder_has_it() -> None:
    assert cited_names("manual.md", ["/data/a"]) == {"/data/a": "manual.md"}
    assert cited_names("manual.md", ["/data/a", "/data/b"]) == {"/data/a": "a/manual.md", "/data/b": "b/manual.md"}
    assert cited_names("x/m.md", ["/one/docs", "/two/docs", "/"]) == {
        "/one/docs": "one/docs/x/m.md",
        "/two/docs": "two/docs/x/m.md",
        "/": "/x/m.md",
    }


def test_same_file_name_in_two_folders_is_cited_with_its_folder(tmp_path: Path) -> None:
    for product, sensors in (("ax100", 4), ("ax200", 8)):
        (tmp_path / product).mkdir()
        (tmp_path / product / "manual.md").write_text(f"# Manual\n\n## Bus\n\nUp to {sensors} sensors on the bus.\n")
    knowledge_base_ingest(target=tmp_path / "ax100")
    assert Source.objects.get().name == "manual.md"
    knowledge_base_ingest(target=tmp_path / "ax200")
    assert set(Source.objects.values_list("name", flat=True)) == {"ax100/manual.md", "ax200/manual.md"}
    found = retrieve(question="How many sensors on the bus?", collection_ids=None).candidates
    cited = {c.as_dict()["source"]: c.chunk.text for c in found}
    assert "4 sensors" in cited["ax100/manual.md"] and "8 sensors" in cited["ax200/manual.md"]
    assert {footnote_text(c).split(" §")[0] for c in found} == {"ax100/manual.md", "ax200/manual.md"}

    (tmp_path / "ax200" / "manual.md").unlink()
    knowledge_base_ingest(target=tmp_path / "ax200")
    assert list(Source.objects.values_list("name", flat=True)) == ["manual.md"]  # unambiguous again


def test_a_same_named_file_in_another_collection_changes_no_citation(tmp_path: Path) -> None:
    for product, sensors in (("ax100", 4), ("ax200", 8)):
        (tmp_path / product).mkdir()
        (tmp_path / product / "manual.md").write_text(f"# Manual\n\n## Bus\n\nUp to {sensors} sensors on the bus.\n")
    knowledge_base_ingest(target=tmp_path / "ax100")
    knowledge_base_ingest(target=tmp_path / "ax200", collection="other")
    # The readers of one collection see nothing of another's files, not even that one has the same name.
    names = set(Source.objects.values_list("collection__name", "name"))
    assert names == {("default", "manual.md"), ("other", "manual.md")}
    knowledge_base_ingest(target=tmp_path / "ax200", move=True)  # now two folders of one collection have it
    assert set(Source.objects.values_list("collection__name", "name")) == {
        ("default", "ax100/manual.md"),
        ("default", "ax200/manual.md"),
    }


def made_before(migration: str, make: Callable[[Any], None]) -> None:
    """``make(apps)`` on the sources app as of ``migration``, then every migration after it."""
    executor = MigrationExecutor(connection)
    executor.migrate([("sources", migration)])
    try:
        make(executor.loader.project_state([("sources", migration)]).apps)
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())


@pytest.mark.django_db(transaction=True)
def test_migration_names_a_source_among_its_collections_folders_only() -> None:
    def make(apps: Any) -> None:
        Collection, Source_ = apps.get_model("sources", "Collection"), apps.get_model("sources", "Source")
        one, two = Collection.objects.create(name="one"), Collection.objects.create(name="two")
        for collection, root in ((one, "/kb/ax100"), (two, "/kb/ax200"), (two, "/kb/ax300")):
            Source_.objects.create(collection=collection, root=root, path="manual.md", name=f"{root[4:]}/manual.md")

    made_before("0008_collection_folder", make)
    assert sorted(Source.objects.values_list("collection__name", "name")) == [
        ("one", "manual.md"),
        ("two", "ax200/manual.md"),
        ("two", "ax300/manual.md"),
    ]


@pytest.mark.django_db(transaction=True)
def test_migration_names_the_sources_already_ingested() -> None:
    def make(apps: Any) -> None:
        collection = apps.get_model("sources", "Collection").objects.create(name="old")
        for root, path in (("/kb/ax100", "manual.md"), ("/kb/ax200", "manual.md"), ("/kb/ax200", "notes.txt")):
            apps.get_model("sources", "Source").objects.create(collection=collection, root=root, path=path)

    made_before("0004_json_reextract", make)
    assert sorted(Source.objects.values_list("name", flat=True)) == ["ax100/manual.md", "ax200/manual.md", "notes.txt"]


def test_the_ingest_report_says_one_chunk_in_the_singular() -> None:
    from foundry_site.cli.ingest import format_report

    one = IngestReport([FileResult("a.md", "ingested", chunks=1), FileResult("b.md", "unchanged", chunks=4)])
    assert "ingested       1  (1 chunk)\n" in format_report(one, target=Path("kb"), collection="default")
    one.files.append(FileResult("c.md", "ingested", chunks=2))
    assert "ingested       2  (3 chunks)\n" in format_report(one, target=Path("kb"), collection="default")


@pytest.mark.django_db(transaction=True)
def test_migration_reads_the_language_of_chunks_already_ingested() -> None:
    from retrieval.models import ChunkSearch

    def make(apps: Any) -> None:
        collection = apps.get_model("sources", "Collection").objects.create(name="old")
        source = apps.get_model("sources", "Source").objects.create(collection=collection, root="/kb", path="a.md")
        Chunk_ = apps.get_model("sources", "Chunk")
        for ordinal, text in enumerate(
            ["Alle Einstellungen des Geräts werden beim Neustart geladen.", "The pump valve opens at 2 bar."]
        ):
            Chunk_.objects.create(source=source, ordinal=ordinal, text=text, line_start=1, line_end=1, token_count=9)

    made_before("0015_table_windows", make)
    german, english = Chunk.objects.order_by("ordinal")
    assert (german.language, english.language) == ("de", "en")
    assert "einstell" in german.stems.split() and english.stems == ""
    assert [h.chunk_id for h in ChunkSearch.search.keyword("Was geschieht mit der Einstellung?")] == [german.pk]
