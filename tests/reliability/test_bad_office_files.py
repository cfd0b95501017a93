"""Bad Word, PowerPoint, Excel, HTML and CSV files through a real ``foundry ingest`` beside good files.

Office files are zip archives: a bomb, a corrupt archive, an encrypted file or the wrong
kind of archive is refused from the archive's directory, before anything is inflated.
Each case: the run goes on, the good files stay indexed, the bad file fails with a reason
that names the problem on its own row, and the index stays consistent.
"""

from __future__ import annotations

import io
import struct
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from sources.models import Chunk, Source
from tests.reliability.test_bad_files import add_and_ingest, ingest_table, stocked_kb  # noqa: F401 (fixture)
from tests.sources.office_files import make_docx, make_pptx, make_xlsx, zip_bytes

pytestmark = pytest.mark.django_db

OLE = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"


def encrypted_office(tmp: Path) -> bytes:
    """What Office writes for a password-protected file: an OLE container with an EncryptionInfo stream."""
    return OLE + b"\x00" * 504 + "EncryptionInfo".encode("utf-16-le") + b"\x00" * 2048


def bomb(tmp: Path) -> bytes:
    """A 'document' whose one part inflates 64 MB of zeros from about 64 KB."""
    return zip_bytes({"[Content_Types].xml": b"<Types/>", "word/document.xml": b"\x00" * (64 << 20)})


def declared_huge(tmp: Path) -> bytes:
    """A real .docx whose directory declares a part of 3 GB: refused from the directory alone."""
    data = bytearray(make_docx(tmp / "real.docx").read_bytes())
    at = data.rfind(b"PK\x01\x02")  # the last central-directory entry
    data[at + 24 : at + 28] = struct.pack("<I", 3 << 30)
    return bytes(data)


def size_lie(tmp: Path) -> bytes:
    """A real .docx whose document part declares fewer bytes than it inflates to."""
    data = bytearray(make_docx(tmp / "real.docx").read_bytes())
    name = b"word/document.xml"
    for header, size_at in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
        at = data.find(header + b"")
        while at >= 0:
            name_at = at + (30 if header == b"PK\x03\x04" else 46)
            if data[name_at : name_at + len(name)] == name:
                data[at + size_at : at + size_at + 4] = struct.pack("<I", 100)
            at = data.find(header, at + 4)
    return bytes(data)


def many_entries(tmp: Path) -> bytes:
    return zip_bytes({f"word/media/{i}.xml": b"" for i in range(10_001)}, compression=zipfile.ZIP_STORED)


FAILS: list[tuple[str, Callable[[Path], bytes], str]] = [
    ("locked.docx", encrypted_office, "password-protected Word document"),
    ("locked.xlsx", encrypted_office, "password-protected Excel workbook"),
    ("locked.pptx", encrypted_office, "password-protected PowerPoint presentation"),
    ("old-format.xlsx", lambda tmp: OLE + b"\x00" * 4096, "an old binary Office file (.doc/.xls/.ppt)"),
    ("not-a-zip.docx", lambda tmp: b"Hello, this is plain text named .docx\n", "not a .docx file"),
    ("corrupt.pptx", lambda tmp: b"PK\x03\x04" + b"\x07" * 2000, "corrupt PowerPoint presentation"),
    ("truncated.xlsx", lambda tmp: make_xlsx(tmp / "t.xlsx").read_bytes()[:3000], "corrupt Excel workbook"),
    ("bomb.docx", bomb, "a zip bomb"),
    ("declared-huge.docx", declared_huge, "would unpack to 3,07"),
    ("size-lie.docx", size_lie, "damaged Word document"),
    ("many-parts.docx", many_entries, "10,001 parts in the archive"),
    ("slides-named.docx", lambda tmp: make_pptx(tmp / "d.pptx").read_bytes(), "archive has no word/document.xml"),
    (
        "scripts-only.html",
        lambda tmp: b"<html><body><script>alert(1)</script><iframe src='x'></iframe></body></html>",
        "HTML page has no text in its main content",
    ),
    (
        "deep.html",
        lambda tmp: b"<html><body>" + b"<div>" * 100_000 + b"x" + b"</div>" * 100_000 + b"</body></html>",
        "HTML nested deeper than 200 elements",
    ),
    ("binary.html", lambda tmp: b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 20, "binary content"),
    ("empty.csv", lambda tmp: b"\n\n", "CSV has no values"),
    ("latin1.csv", lambda tmp: "Stadt;Druck\nM\xfcnchen;3 bar\n".encode("latin-1"), "not valid UTF-8"),
    ("wide.xlsx", lambda tmp: wide_sheet(tmp), "has values past column 1,000"),
    # Found by the parser fuzzer (test_parser_fuzz.py); each one was an "unexpected error" before.
    ("bad-deflate.docx", lambda tmp: bad_deflate(tmp), "damaged Word document: error: Error -3 while decompressing"),
    ("broken-sheet.xlsx", lambda tmp: broken_part(make_xlsx(tmp / "s.xlsx"), "xl/worksheets/sheet1.xml"), "ParseError"),
    (
        "no-target.pptx",
        lambda tmp: relationship_without_target(tmp),
        "damaged PowerPoint presentation: InvalidXmlError",
    ),
]


def archive_parts(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return {info.filename: archive.read(info) for info in archive.infolist()}


def broken_part(path: Path, part: str) -> bytes:
    """A good archive with one part's XML cut to an unclosed tag (openpyxl reads worksheets with ElementTree)."""
    return zip_bytes({**archive_parts(path.read_bytes()), part: b"<"})


def relationship_without_target(tmp: Path) -> bytes:
    parts = archive_parts(make_pptx(tmp / "s.pptx").read_bytes())
    rels = "ppt/_rels/presentation.xml.rels"
    return zip_bytes({**parts, rels: parts[rels].replace(b" Target=", b" Targex=", 1)})


def bad_deflate(tmp: Path) -> bytes:
    """A .docx whose document part's deflate data starts with an invalid block type (a CRC check never gets to run)."""
    data = bytearray(make_docx(tmp / "s.docx").read_bytes())
    with zipfile.ZipFile(io.BytesIO(bytes(data))) as archive:
        at = archive.getinfo("word/document.xml").header_offset
    name_length, extra_length = struct.unpack("<HH", data[at + 26 : at + 30])
    data[at + 30 + name_length + extra_length] = 0xFF  # BFINAL 1, BTYPE 11: reserved
    return bytes(data)


def wide_sheet(tmp: Path) -> bytes:
    import openpyxl

    book = openpyxl.Workbook()
    book.active["A1"], book.active.cell(row=2, column=5000).value = "Header", "far right"
    book.save(str(tmp / "wide.xlsx"))
    return (tmp / "wide.xlsx").read_bytes()


@pytest.mark.parametrize("name,make,reason", FAILS, ids=[case[0] for case in FAILS])
def test_bad_office_file_fails_with_its_reason(
    stocked_kb: Path,
    tmp_path: Path,
    name: str,  # noqa: F811
    make: Callable[[Path], bytes],
    reason: str,
) -> None:
    row = add_and_ingest(stocked_kb, name, make(tmp_path))
    assert row["status"] == "failed" and reason in row["reason"], row
    assert "unexpected error" not in row["reason"]
    assert not Chunk.objects.filter(source__path=name).exists()
    table = ingest_table(stocked_kb)
    assert any(name in line and reason in line for line in table.splitlines()), table


def test_a_broken_new_version_keeps_the_stored_one(stocked_kb: Path, tmp_path: Path) -> None:  # noqa: F811
    make_docx(stocked_kb / "manual.docx")
    assert add_and_ingest(stocked_kb, "manual.docx", (stocked_kb / "manual.docx").read_bytes())["status"] == "ingested"
    kept = list(Chunk.objects.filter(source__path="manual.docx").values_list("text", flat=True))
    row = add_and_ingest(stocked_kb, "manual.docx", bomb(tmp_path))
    assert row["status"] == "failed" and "zip bomb" in row["reason"]
    assert list(Chunk.objects.filter(source__path="manual.docx").values_list("text", flat=True)) == kept
    assert "previously ingested version stays indexed" in Source.objects.get(path="manual.docx").reason


def test_macros_are_ignored_and_the_text_is_read(stocked_kb: Path, tmp_path: Path) -> None:  # noqa: F811
    """A .docx carrying a VBA project (as a .docm renamed) is read as text; the macro part is never opened."""
    source = make_docx(tmp_path / "m.docx").read_bytes()
    buffer = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(source)) as original, zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as out:
        for item in original.infolist():
            out.writestr(item, original.read(item.filename))
        out.writestr("word/vbaProject.bin", b'Attribute VB_Name = "AutoOpen"\nShell "calc.exe"\n')
    row = add_and_ingest(stocked_kb, "macro.docx", buffer.getvalue())
    assert row["status"] == "ingested", row
    assert not Chunk.objects.filter(source__path="macro.docx", text__contains="Shell").exists()


def test_a_million_empty_rows_are_read_in_bounded_time(stocked_kb: Path, tmp_path: Path) -> None:  # noqa: F811
    import openpyxl

    book = openpyxl.Workbook()
    sheet = book.active
    sheet["A1"], sheet["A2"], sheet["A1048576"] = "Note", "first row", "last row"
    book.save(str(tmp_path / "sparse.xlsx"))
    row = add_and_ingest(stocked_kb, "sparse.xlsx", (tmp_path / "sparse.xlsx").read_bytes())
    assert row["status"] == "ingested", row
    chunk = Chunk.objects.get(source__path="sparse.xlsx")
    assert chunk.text == "Note\nfirst row\n\nlast row" and (chunk.line_start, chunk.line_end) == (2, 1048576)


def test_external_links_and_remote_images_are_never_fetched(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Word file linking a remote image and a web page, and an HTML page full of remote
    references, are read without a single network connection."""
    import socket

    import docx
    from docx.opc.constants import RELATIONSHIP_TYPE as RT
    from docx.oxml import parse_xml

    from sources.services.extract import extract

    document = docx.Document()
    paragraph = document.add_paragraph("See the ")
    link = document.part.relate_to("http://example.invalid/datasheet", RT.HYPERLINK, is_external=True)
    document.part.relate_to("http://example.invalid/tracker.png", RT.IMAGE, is_external=True)
    paragraph._p.append(
        parse_xml(
            f'<w:hyperlink xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main" '
            f'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships" r:id="{link}">'
            "<w:r><w:t>online datasheet</w:t></w:r></w:hyperlink>"
        )
    )
    document.save(str(tmp_path / "links.docx"))
    page = (
        b'<html><head><link rel="stylesheet" href="http://example.invalid/s.css"><base href="http://x.invalid/">'
        b'<meta http-equiv="refresh" content="0; url=http://example.invalid/"></head><body>'
        b'<img src="http://example.invalid/a.png"><iframe src="http://example.invalid/f"></iframe>'
        b'<object data="http://example.invalid/o.swf"></object><p>Relay K1 switches 230 V.</p></body></html>'
    )
    attempts: list[object] = []
    monkeypatch.setattr(socket.socket, "connect", lambda self, address: attempts.append(address))
    words = extract(Path("links.docx"), (tmp_path / "links.docx").read_bytes()).blocks[0].text
    html_text = [b.text for b in extract(Path("page.html"), page).blocks]
    assert words == "See the online datasheet" and html_text == ["Relay K1 switches 230 V."]
    assert attempts == []
