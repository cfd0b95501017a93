"""Checks every Office file (.docx, .pptx, .xlsx: zip archives of XML parts) passes before it is parsed.

The parsers (python-docx, python-pptx, openpyxl) inflate parts into memory, so a
zip bomb, a corrupt archive or an encrypted file must be refused from the archive's
directory alone, before any part is decompressed. Declared sizes are enough to
bound the work: ``zipfile`` stops reading an entry at its declared size and fails
its CRC check when the data says otherwise, so a part can never inflate past what
the directory declares. Macros (``vbaProject.bin``), external links and remote
images are parts or relationships the extractors never read, run or fetch.
"""

from __future__ import annotations

import io
import zipfile
import zlib
from xml.etree.ElementTree import ParseError
from collections.abc import Iterator
from contextlib import contextmanager

from sources.services.extract.blocks import ExtractionError

MAX_ENTRIES = 10_000
MAX_UNCOMPRESSED = 256 * 1024 * 1024  # all parts together, as declared
# Deflate cannot shrink real XML or media by more than ~100:1; a bomb's parts reach 1000:1 and more.
MAX_RATIO = 200
RATIO_FLOOR = 1024 * 1024  # small parts of repeated markup may compress well; only big ones are judged
_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
_ENCRYPTED_MARK = "EncryptionInfo".encode("utf-16-le")

NAMES = {"docx": "Word document", "pptx": "PowerPoint presentation", "xlsx": "Excel workbook"}
MAIN_PART = {"docx": "word/document.xml", "pptx": "ppt/presentation.xml", "xlsx": "xl/workbook.xml"}


def office_check(data: bytes, *, kind: str) -> None:
    """Raise ExtractionError unless ``data`` is a sane, unencrypted Office Open XML archive of ``kind``."""
    name = NAMES[kind]
    if data.startswith(_OLE_MAGIC):
        if _ENCRYPTED_MARK in data:
            raise ExtractionError(
                f"password-protected {name}: Foundry cannot read encrypted files; save a copy without a password"
            )
        raise ExtractionError(
            f"not a .{kind} file: an old binary Office file (.doc/.xls/.ppt) with a .{kind} name; save it as .{kind}"
        )
    if not data.startswith(b"PK"):
        raise ExtractionError(f"not a .{kind} file (a {name} is a zip archive; this file is not one)")
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, EOFError) as exc:
        raise ExtractionError(f"corrupt {name}: the zip archive cannot be read ({exc})") from None
    with archive:
        entries = archive.infolist()
        _check_sizes(entries, name=name)
        names = {entry.filename for entry in entries}
        if MAIN_PART[kind] not in names:
            raise ExtractionError(f"not a {name}: the archive has no {MAIN_PART[kind]}")
        if any(entry.flag_bits & 0x1 for entry in entries):
            raise ExtractionError(f"password-protected {name}: its zip entries are encrypted")


def _check_sizes(entries: list[zipfile.ZipInfo], *, name: str) -> None:
    if len(entries) > MAX_ENTRIES:
        raise ExtractionError(
            f"{name} refused: {len(entries):,} parts in the archive (more than {MAX_ENTRIES:,}; "
            "a zip bomb or not a document)"
        )
    total = sum(entry.file_size for entry in entries)
    if total > MAX_UNCOMPRESSED:
        raise ExtractionError(
            f"{name} refused: it would unpack to {total / 1048576:,.0f} MB (more than "
            f"{MAX_UNCOMPRESSED // 1048576} MB; a zip bomb or not a document)"
        )
    for entry in entries:
        if entry.file_size > RATIO_FLOOR and entry.file_size > MAX_RATIO * max(entry.compress_size, 1):
            raise ExtractionError(
                f"{name} refused: part {entry.filename[:100]!r} inflates {entry.compress_size:,} "
                f"bytes to {entry.file_size:,} (a zip bomb)"
            )


def _parser_errors(kind: str) -> tuple[type[Exception], ...]:
    """The errors of the kind's own parser library that say the file is damaged (python-pptx raises its
    InvalidXmlError for a relationship without a target, python-docx its own, openpyxl InvalidFileException)."""
    if kind == "docx":
        from docx.exceptions import PythonDocxError
        from docx.opc.exceptions import OpcError

        return (PythonDocxError, OpcError)
    if kind == "pptx":
        from pptx.exc import PythonPptxError

        return (PythonPptxError,)
    from openpyxl.utils.exceptions import InvalidFileException

    return (InvalidFileException,)


@contextmanager
def office_errors(kind: str) -> Iterator[None]:
    """Turn what a parser raises on a damaged archive into an ExtractionError naming the format.

    The parsers raise KeyError for a missing part, lxml's XMLSyntaxError (a ValueError... or not)
    or ElementTree's ParseError (openpyxl reads some parts with it) for broken XML,
    zipfile.BadZipFile for a bad CRC, zlib.error for a part whose deflate data is damaged,
    NotImplementedError for a compression method zipfile lacks, ValueError for a wrong content
    type, and errors of their own (``_parser_errors``).
    """
    from lxml import etree

    damaged: tuple[type[Exception], ...] = (
        KeyError,
        ValueError,
        zipfile.BadZipFile,
        zlib.error,
        NotImplementedError,
        etree.LxmlError,
        ParseError,
        EOFError,
        IndexError,
        TypeError,
        AttributeError,
        *_parser_errors(kind),
    )
    try:
        yield
    except ExtractionError:
        raise
    except damaged as exc:
        raise ExtractionError(f"damaged {NAMES[kind]}: {type(exc).__name__}: {str(exc)[:200]}") from None
