"""Bad files through a real ``foundry ingest`` of a folder that also holds good files.

For every case: the run goes on, the good files stay indexed (nothing already
stored is lost), the bad file gets a specific reason on its own row, and the
index stays consistent (chunk, FTS and vector rows agree; PRAGMA integrity_check ok).
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from sources.models import Chunk, Source
from sources.services import prepare
from sources.services.chunking import chunk_blocks
from sources.services.extract import MAX_HEADING_CHARS, Block
from sources.services.integrity import index_check
from tests.conftest import make_pdf

pytestmark = pytest.mark.django_db

# The shared evaluation data sits next to the project (../shared/eval) unless FOUNDRY_EVAL_DATA says where.
EVAL_DATA = Path(os.environ.get("FOUNDRY_EVAL_DATA", Path(__file__).resolve().parents[3] / "shared" / "eval"))
EDGE_PDFS = EVAL_DATA / "pdfs" / "edge"
EDGE_PDF_NAMES = (
    sorted(p.name for p in EDGE_PDFS.glob("*.pdf"))
    if EDGE_PDFS.is_dir()
    else [pytest.param(None, marks=pytest.mark.skip(reason=f"no edge PDFs at {EDGE_PDFS}; set FOUNDRY_EVAL_DATA"))]
)
GOOD = {
    "good.md": "# Pumps\n\nThe pump P1 delivers 40 litres per minute at 3 bar.\n",
    "notes.txt": "Valve V2 must be serviced every 500 operating hours.\n",
}


def ingest_exit(kb: Path, *args: str) -> tuple[int, str]:
    """Run ``foundry ingest`` on the folder: its exit code and output."""
    out = io.StringIO()
    try:
        call_command("foundry", "ingest", str(kb), *args, stdout=out)
    except SystemExit as exc:
        return int(exc.code), out.getvalue()
    return 0, out.getvalue()


def ingest_cli(kb: Path) -> dict[str, dict[str, Any]]:
    """Run ``foundry ingest --json`` on the folder; the per-file rows by path."""
    code, out = ingest_exit(kb, "--json")
    rows = {row["path"]: row for row in json.loads(out)["files"]}
    assert code == (1 if any(row["status"] == "failed" for row in rows.values()) else 0)  # a script sees a failure
    return rows


def ingest_table(kb: Path) -> str:
    code, out = ingest_exit(kb)
    failed = int(re.search(r"^  failed +(\d+)$", out, re.MULTILINE).group(1))
    assert code == (1 if failed else 0)
    return out


@pytest.fixture
def stocked_kb(kb: Path) -> Path:
    """A knowledge base whose good files are already ingested."""
    for name, text in GOOD.items():
        (kb / name).write_text(text)
    rows = ingest_cli(kb)
    assert all(rows[name]["status"] == "ingested" for name in GOOD)
    return kb


def good_files_intact() -> None:
    for name in GOOD:
        source = Source.objects.get(path=name)
        assert source.status == "ingested" and source.chunk_count == Chunk.objects.filter(source=source).count() > 0
    report = index_check()
    assert report.ok, (report.sqlite, report.problems)


def add_and_ingest(kb: Path, name: str, data: bytes) -> dict[str, Any]:
    (kb / name).write_bytes(data)
    rows = ingest_cli(kb)
    for good in GOOD:
        assert rows[good]["status"] == "unchanged"
    good_files_intact()
    return rows[name]


def truncated_pdf(tmp: Path) -> bytes:
    data = make_pdf(tmp / "whole.pdf", [("1 Intro", "Some text " * 200), ("2 More", "Other text " * 200)]).read_bytes()
    return data[: len(data) // 3]


def self_referencing_pdf(tmp: Path) -> bytes:
    """A PDF whose catalog is a stream with its /Length in itself: pypdf's LimitReachedError (found by the fuzzer)."""
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R /Length 1 0 R >>\nstream\nabc\nendstream",
        b"<< /Type /Pages /Kids [] >>",
    ]
    out, offsets = bytearray(b"%PDF-1.4\n"), []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 3\n0000000000 65535 f \n" + b"".join(b"%010d 00000 n \n" % at for at in offsets)
    out += b"trailer\n<< /Size 3 /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % xref
    return bytes(out)


FAILS = [
    ("empty.txt", lambda tmp: b"", "empty file (0 bytes)"),
    ("empty.md", lambda tmp: b"", "empty file (0 bytes)"),
    ("empty.pdf", lambda tmp: b"", "empty file (0 bytes)"),
    ("empty.json", lambda tmp: b"", "empty file (0 bytes)"),
    ("binary.txt", lambda tmp: b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + os.urandom(4096), "binary content"),
    ("page.pdf", lambda tmp: b"<!DOCTYPE html><html><body>Login required</body></html>", "not a PDF file"),
    ("truncated.pdf", truncated_pdf, "PDF"),
    ("self-reference.pdf", self_referencing_pdf, "damaged PDF: cannot read its pages (Detected loop"),
    ("deep.json", lambda tmp: b"[" * 100_000 + b"]" * 100_000, "nested deeper than 64 levels"),
    ("deep-objects.json", lambda tmp: b'{"a":' * 100_000 + b"1" + b"}" * 100_000, "nested deeper than 64 levels"),
    ("bomb.json", lambda tmp: b"[" + b"[]," * 2_100_000 + b"[]]", "JSON bomb"),
    (
        "duplicate-key.json",
        lambda tmp: b'{"pump": "P1", "limit": "10 bar", "limit": "12 bar"}',
        'duplicate JSON key "limit" at $.limit',
    ),
    ("latin1.txt", lambda tmp: "Druck: 3 bar, Temperatur 20 \xb0C, M\xfcnchen".encode("latin-1"), "not valid UTF-8"),
    (
        "utf16-nobom.txt",
        lambda tmp: "Pump P7 runs at 1450 rpm.".encode("utf-16-le"),
        "UTF-16 (little-endian) text without a byte-order mark",
    ),
    (
        "utf16-nobom-be.md",
        lambda tmp: "# Pump\n\nP7 runs at 1450 rpm.".encode("utf-16-be"),
        "UTF-16 (big-endian) text without a byte-order mark",
    ),
]


@pytest.mark.parametrize("name,make,reason", FAILS, ids=[case[0] for case in FAILS])
def test_bad_file_fails_with_its_reason(
    stocked_kb: Path, tmp_path: Path, name: str, make: Callable[[Path], bytes], reason: str
) -> None:
    row = add_and_ingest(stocked_kb, name, make(tmp_path))
    assert row["status"] == "failed" and reason in row["reason"], row
    assert "unexpected error" not in row["reason"]
    assert not Chunk.objects.filter(source__path=name).exists()
    table = ingest_table(stocked_kb)
    assert any(name in line and reason in line for line in table.splitlines()), table


def test_utf16_with_bom_is_read(stocked_kb: Path) -> None:
    row = add_and_ingest(stocked_kb, "utf16.txt", "Pump P7 runs at 1450 rpm.\n".encode("utf-16"))
    assert row["status"] == "ingested"
    assert Chunk.objects.get(source__path="utf16.txt").text == "Pump P7 runs at 1450 rpm."


def test_json_with_huge_keys_keeps_headings_bounded(stocked_kb: Path) -> None:
    """Every block repeats its key path as heading: megabyte keys nested deep must not be stored per chunk."""
    doc: Any = {"values": [f"reading {i}: pressure {i % 7} bar" for i in range(400)]}
    for level in range(30):
        doc = {f"k{level}" + "x" * 100_000: doc}
    row = add_and_ingest(stocked_kb, "keys.json", json.dumps(doc).encode())
    assert row["status"] == "ingested" and row["chunks"] > 1
    for chunk in Chunk.objects.filter(source__path="keys.json"):
        assert all(len(part) <= MAX_HEADING_CHARS for part in chunk.heading.split(" > "))


def test_json_with_duplicate_keys_is_refused_and_the_stored_version_kept(stocked_kb: Path) -> None:
    """Python's json keeps the last of repeated keys and drops the others without a word: a file that
    says two things under one key is refused with the key and its JSON path, like any other bad file."""
    target = stocked_kb / "pumps.json"
    target.write_text(json.dumps({"title": "Pumps", "pumps": [{"model": "P1", "flow": "40 litres per minute"}]}))
    assert ingest_cli(stocked_kb)["pumps.json"]["status"] == "ingested"
    target.write_text(
        '{"title": "Pumps", "pumps": [{"model": "P1", "flow": "40 litres per minute"},\n'
        ' {"model": "P2", "flow": "55 litres per minute", "flow": "65 litres per minute"}],\n'
        ' "service notes": {"interval": "500 h", "interval": "800 h"}}'
    )
    row = ingest_cli(stocked_kb)["pumps.json"]
    assert row["status"] == "failed", row
    assert row["reason"].startswith('duplicate JSON key "flow" at $.pumps[1].flow (and 1 more repeated key): '), row
    assert row["reason"].endswith("(the previously ingested version stays indexed)"), row  # said where it is read
    source = Source.objects.get(path="pumps.json")
    assert "previously ingested version stays indexed" in source.reason
    stored = " ".join(Chunk.objects.filter(source=source).values_list("text", flat=True))
    assert "40 litres per minute" in stored and "P2" not in stored
    table = ingest_table(stocked_kb)
    assert any(
        "pumps.json" in line and 'duplicate JSON key "flow" at $.pumps[1].flow' in line for line in table.splitlines()
    ), table
    target.write_text('{"service notes": {"interval": "500 h", "interval": "800 h"}}')
    assert ingest_cli(stocked_kb)["pumps.json"]["reason"].startswith(
        'duplicate JSON key "interval" at $["service notes"].interval: '
    )
    good_files_intact()


def test_fifty_mb_json_is_skipped_by_max_file_mb(stocked_kb: Path) -> None:
    with (stocked_kb / "big.json").open("w") as handle:
        handle.write('{"rows": [')
        handle.write(",".join(json.dumps({"id": i, "note": "x" * 480}) for i in range(105_000)))
        handle.write("]}")
    assert (stocked_kb / "big.json").stat().st_size > 50 * 1024 * 1024
    rows = ingest_cli(stocked_kb)
    assert rows["big.json"]["status"] == "skipped"
    reason = rows["big.json"]["reason"]
    assert "larger than ingest.max_file_mb (" in reason and "MB > 25 MB)" in reason
    good_files_intact()


def test_ten_mb_single_line_is_chunked_in_linear_work() -> None:
    """A line without spaces (base64) made the chunker re-count the rest after every cut: 200 KB took over
    five minutes, 10 MB hours. Now 10 MB takes ~160 s at load 10 (tokenizing base64 is slow); 2 MB here."""
    import base64

    from django.conf import settings

    from sources.services.enrich import ChunkSizing

    sizing = ChunkSizing.for_model(settings.FOUNDRY.embedding.model, 200)
    counted = 0

    def count(text: str) -> int:
        nonlocal counted
        counted += len(text)
        return sizing.count(text)

    line = base64.b64encode(os.urandom(1_500_000)).decode()
    drafts = chunk_blocks([Block(line, (), None, 1, 1)], max_tokens=sizing.max_chunk_tokens, count=count)
    assert "".join("".join(d.text.split()) for d in drafts) == line
    assert all(d.token_count <= sizing.max_chunk_tokens and len(d.text) <= 2000 for d in drafts)
    assert counted < 4 * len(line)  # each character is counted a bounded number of times


def test_single_long_line_of_one_character_is_not_one_chunk(stocked_kb: Path) -> None:
    """The tokenizer counts any word over 100 characters as one [UNK]: chunks are capped in characters too."""
    row = add_and_ingest(stocked_kb, "line.txt", b"a" * 1_000_000)
    assert row["status"] == "ingested" and row["chunks"] >= 1_000_000 // 2000
    assert max(len(c.text) for c in Chunk.objects.filter(source__path="line.txt")) <= 2000


def test_markdown_heading_with_long_space_run_parses_quickly(stocked_kb: Path) -> None:
    """The old heading regex backtracked cubically: this 40 KB line took hours."""
    data = ("# Title" + " " * 40_000 + "x\n\nBody text about the pump.\n").encode()
    row = add_and_ingest(stocked_kb, "spaces.md", data)
    assert row["status"] == "ingested"


def test_json_newline_run_splits_quickly(stocked_kb: Path) -> None:
    """A value holding a long run of newlines made the sentence splitter quadratic."""
    row = add_and_ingest(stocked_kb, "newlines.json", json.dumps({"note": "start" + "\n" * 200_000 + "end"}).encode())
    assert row["status"] == "ingested"


CONTROL_NAME = "line\nbreak\ttab\x1b[31mred\x7fdel.txt"


def test_control_characters_in_name_stored_and_printed_escaped(stocked_kb: Path) -> None:
    (stocked_kb / CONTROL_NAME).write_text("The compressor C3 trips at 11 bar.\n")
    table = ingest_table(stocked_kb)
    source = Source.objects.get(path=CONTROL_NAME)
    assert source.status == "ingested" and "C3 trips" in Chunk.objects.get(source=source).text
    for raw in ("\x1b", "\x7f", "\t"):
        assert raw not in table
    assert "line\\nbreak\\ttab\\x1b[31mred\\x7fdel.txt" in table
    assert not any(line.startswith("break") for line in table.splitlines())  # the name's newline split no row
    out = io.StringIO()
    call_command("foundry", "status", stdout=out)
    assert "\x1b" not in out.getvalue() and "line\\nbreak" in out.getvalue()
    good_files_intact()


def test_file_name_not_utf8_is_skipped_with_escaped_name(stocked_kb: Path) -> None:
    with open(os.path.join(os.fsencode(stocked_kb), b"caf\xe9.txt"), "wb") as handle:
        handle.write(b"Some text.")
    rows = ingest_cli(stocked_kb)
    assert rows["caf\\xe9.txt"] == {
        "path": "caf\\xe9.txt",
        "status": "skipped",
        "reason": "file name is not valid UTF-8; rename the file",
        "chunks": 0,
    }
    good_files_intact()


def test_symlinks_are_never_followed_and_say_where_they_point(stocked_kb: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("The outside secret is 42.")
    os.symlink(outside / "secret.txt", stocked_kb / "outside.txt")
    os.symlink(outside, stocked_kb / "outside-dir")
    os.symlink("loop-b.txt", stocked_kb / "loop-a.txt")
    os.symlink("loop-a.txt", stocked_kb / "loop-b.txt")
    os.symlink("good.md", stocked_kb / "inside.md")
    os.symlink("missing.txt", stocked_kb / "broken.txt")
    rows = ingest_cli(stocked_kb)
    expected = {
        "outside.txt": "symbolic link to a file outside the knowledge base (not followed)",
        "outside-dir": "symbolic link to a file outside the knowledge base (not followed)",
        "loop-a.txt": "symbolic link loop (not followed)",
        "loop-b.txt": "symbolic link loop (not followed)",
        "inside.md": "symbolic link to good.md inside the knowledge base (not followed; "
        "the target counts under its own path)",
        "broken.txt": "symbolic link to a missing file (broken link; not followed)",
    }
    assert {name: (rows[name]["status"], rows[name]["reason"]) for name in expected} == {
        name: ("skipped", reason) for name, reason in expected.items()
    }
    assert not Chunk.objects.filter(text__contains="outside secret").exists()
    assert Source.objects.filter(path="good.md").count() == 1 and not Source.objects.filter(path="inside.md").exists()
    good_files_intact()


def test_a_file_named_that_cannot_be_ingested_fails_the_command(stocked_kb: Path) -> None:
    (stocked_kb / "notes.xyz").write_text("Not a document type Foundry reads.")
    code, out = ingest_exit(stocked_kb / "notes.xyz")
    assert code == 1 and "skipped" in out and "notes.xyz" in out
    assert "Nothing from " in out and "is stored: see each file's reason." in out and "Next: ask" not in out
    (stocked_kb.parent / "empty").mkdir()
    code, out = ingest_exit(stocked_kb.parent / "empty")
    assert code == 0 and "No files found in " in out and "Next: ask" not in out
    code, out = ingest_exit(stocked_kb)  # in a folder, a file of another kind is passed over
    assert code == 0 and "Next: ask a question" in out
    good_files_intact()


def test_named_pipe_is_skipped_not_read(stocked_kb: Path) -> None:
    """Reading a FIFO blocks forever: it must be skipped before anything opens it."""
    os.mkfifo(stocked_kb / "pipe.txt")
    rows = ingest_cli(stocked_kb)
    assert rows["pipe.txt"]["status"] == "skipped" and "not a regular file" in rows["pipe.txt"]["reason"]
    good_files_intact()


def test_file_changed_during_read_stores_one_consistent_version(
    stocked_kb: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = stocked_kb / "live.txt"
    target.write_text("Version one: the limit is 10 bar.\n")
    real = prepare.read_bytes
    reads = []

    def torn_read(path: Path) -> bytes:
        data = real(path)
        if path.name == "live.txt" and not reads:
            # A writer replaces the file while it is being read: the bytes read are half old, half new.
            target.write_text("Version two: the limit is 12 bar, was changed by the writer.\n")
            os.utime(target, ns=(1, 1_000_000_000))
            data = data[: len(data) // 2] + b"bar, was changed\n"
        if path.name == "live.txt":
            reads.append(data)
        return data

    monkeypatch.setattr(prepare, "read_bytes", torn_read)
    rows = ingest_cli(stocked_kb)
    assert rows["live.txt"]["status"] == "ingested" and len(reads) == 2
    stored = Chunk.objects.get(source__path="live.txt").text
    assert stored == "Version two: the limit is 12 bar, was changed by the writer."
    good_files_intact()


def test_file_that_never_settles_fails_and_keeps_previous_version(
    stocked_kb: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = stocked_kb / "live.txt"
    target.write_text("Version one: the limit is 10 bar.\n")
    ingest_cli(stocked_kb)
    target.write_text("Version two: the limit is 12 bar.\n")
    real = prepare.read_bytes
    tick = iter(range(10, 100))

    def always_changing(path: Path) -> bytes:
        data = real(path)
        if path.name == "live.txt":
            os.utime(target, ns=(1, next(tick) * 1_000_000_000))
        return data

    monkeypatch.setattr(prepare, "read_bytes", always_changing)
    rows = ingest_cli(stocked_kb)
    assert rows["live.txt"]["status"] == "failed"
    assert "file kept changing while it was read (3 attempts)" in rows["live.txt"]["reason"]
    source = Source.objects.get(path="live.txt")
    assert "previously ingested version stays indexed" in source.reason
    assert Chunk.objects.get(source=source).text == "Version one: the limit is 10 bar."
    good_files_intact()


def test_file_vanishing_during_ingest_fails_clearly_then_is_removed(
    stocked_kb: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (stocked_kb / "gone.txt").write_text("Temporary note about filter F9.\n")
    ingest_cli(stocked_kb)
    (stocked_kb / "gone.txt").write_text("Changed note about filter F9.\n")
    real = prepare.read_bytes

    def vanish(path: Path) -> bytes:
        if path.name == "gone.txt":
            path.unlink()
        return real(path)

    monkeypatch.setattr(prepare, "read_bytes", vanish)
    rows = ingest_cli(stocked_kb)
    assert rows["gone.txt"] == {
        "path": "gone.txt",
        "status": "failed",
        "chunks": 0,
        "reason": "file vanished during ingest (deleted or moved while being read) "
        "(the previously ingested version stays indexed)",
    }
    assert Chunk.objects.get(source__path="gone.txt").text == "Temporary note about filter F9."
    good_files_intact()
    monkeypatch.undo()
    rows = ingest_cli(stocked_kb)
    assert rows["gone.txt"]["status"] == "removed" and not Source.objects.filter(path="gone.txt").exists()
    good_files_intact()


def test_file_vanishing_during_scan_is_skipped_and_the_run_goes_on(
    stocked_kb: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (stocked_kb / "flash.txt").write_text("Here for a moment.\n")
    real = prepare.kind_of

    def vanish_then_kind(path: Path) -> str | None:
        if path.name == "flash.txt" and path.exists():
            path.unlink()  # deleted between the folder listing and the size check
        return real(path)

    monkeypatch.setattr(prepare, "kind_of", vanish_then_kind)
    rows = ingest_cli(stocked_kb)
    assert rows["flash.txt"]["status"] == "skipped"
    assert rows["flash.txt"]["reason"] == "file vanished while the folder was scanned"
    good_files_intact()


# Reasons a PDF may legitimately fail with: each names the problem and what it means.
PDF_REASONS = (
    "encrypted PDF:",
    "PDF has no extractable text",
    "damaged PDF:",
    "not a PDF file",
    "PDF has no text layer, and OCR found no text",
    "PDF page ",
)


@pytest.mark.parametrize("name", EDGE_PDF_NAMES)
def test_edge_pdf_ingests_or_fails_with_a_specific_reason(stocked_kb: Path, name: str) -> None:
    shutil.copy(EDGE_PDFS / name, stocked_kb / name)
    rows = ingest_cli(stocked_kb)
    row = rows[name]
    good_files_intact()
    if row["status"] == "ingested":
        assert row["chunks"] == Chunk.objects.filter(source__path=name).count() > 0
    else:
        assert row["status"] == "failed" and row["reason"].startswith(PDF_REASONS), row
        assert not Chunk.objects.filter(source__path=name).exists()
