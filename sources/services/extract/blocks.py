"""What every extractor makes: text blocks that remember where they came from, and the text checks
they share (decoding, paragraphs). The format modules of this package build on this one alone."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

KINDS = {
    ".txt": "txt",
    ".md": "md",
    ".markdown": "md",
    ".pdf": "pdf",
    ".json": "json",
    ".docx": "docx",
    ".html": "html",
    ".htm": "html",
    ".xlsx": "xlsx",
    ".csv": "csv",
    ".pptx": "pptx",
    ".png": "image",
    ".jpg": "image",
    ".jpeg": "image",
    ".tif": "image",
    ".tiff": "image",
}
MAX_HEADING_CHARS = 300


class ExtractionError(Exception):
    """The file cannot be turned into text; the message says why."""


@dataclass(frozen=True)
class Block:
    """``lead``: text repeated at the top of every chunk made from this block (a table's header row);
    ``unit``: blocks of different units never share a chunk (one slide, one table);
    ``ocr``: the OCR engine's mean word confidence (0-100) when the text was read from an image."""

    text: str
    heading: tuple[str, ...]
    page: int | None
    line_start: int
    line_end: int
    lead: str = ""
    unit: int | None = None
    ocr: float | None = None


@dataclass(frozen=True)
class Extracted:
    """``notes``: what the file's report must say although it was read (parts left out, and why);
    ``issued``: the date the document gives itself (its metadata: last modified, else created), None when it
    gives none (the file's modification time stands in; see ``Source.dated``)."""

    title: str
    blocks: list[Block]
    notes: tuple[str, ...] = ()
    issued: datetime | None = None


# Office files are ZIP archives, whose timestamps start in 1980: a date before it is a writer's placeholder.
EARLIEST_DATE = datetime(1980, 1, 1, tzinfo=UTC)


def stated_date(*candidates: object) -> datetime | None:
    """The first of ``candidates`` that is a plausible document date (a datetime from 1980 to now; a naive one
    taken as UTC), else None. Metadata written by tools holds placeholders and future dates alike."""
    now = datetime.now(UTC)
    for value in candidates:
        if not isinstance(value, datetime):
            continue
        when = value if value.tzinfo else value.replace(tzinfo=UTC)
        if EARLIEST_DATE <= when <= now:
            return when
    return None


def kind_of(path: Path) -> str | None:
    return KINDS.get(path.suffix.lower())


def decode_text(data: bytes) -> str:
    """Decode UTF-8 (with or without BOM); anything else is refused, not guessed."""
    if b"\x00" in data[:8192] and not data.startswith((b"\xff\xfe", b"\xfe\xff")):
        order = _utf16_order(data[:8192])
        if order:
            raise ExtractionError(
                f"UTF-16 ({order}) text without a byte-order mark; save it as UTF-8 (or as UTF-16 with a BOM)"
            )
        raise ExtractionError("binary content (NUL bytes) in a text file")
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError as exc:
            raise ExtractionError(f"invalid UTF-16 text at byte {exc.start}") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ExtractionError(f"not valid UTF-8 text (byte {exc.start}); convert the file to UTF-8") from None


def _utf16_order(sample: bytes) -> str:
    """'little-endian' or 'big-endian' when NUL bytes sit in every other position, as in UTF-16 of
    mostly Latin text; '' otherwise. Used only to name the problem, never to decode."""
    even, odd = sample[0::2], sample[1::2]
    if len(odd) < 4:
        return ""
    if odd.count(0) >= len(odd) * 0.4 and even.count(0) <= len(even) * 0.05:
        return "little-endian"
    if even.count(0) >= len(even) * 0.4 and odd.count(0) <= len(odd) * 0.05:
        return "big-endian"
    return ""


def paragraphs(lines: list[str], first_line: int) -> list[tuple[str, int, int]]:
    """Split lines into blank-line separated paragraphs: (text, line_start, line_end)."""
    out: list[tuple[str, int, int]] = []
    buf: list[str] = []
    start = first_line
    for offset, line in enumerate(lines):
        number = first_line + offset
        if line.strip():
            if not buf:
                start = number
            buf.append(line.rstrip())
        elif buf:
            out.append(("\n".join(buf), start, number - 1))
            buf = []
    if buf:
        out.append(("\n".join(buf), start, first_line + len(lines) - 1))
    return out
