"""Turn a file into text blocks that remember where they came from.

A block is a paragraph-sized piece of text with its heading path, page (PDF page,
slide of a presentation) and 1-based line span. What a "line" is depends on the kind
(``sources.models.LINE_UNITS``): lines of the file for text, Markdown, JSON and HTML; lines of
the page's text for PDFs and slides; paragraphs for Word files; rows for spreadsheets and CSV.
Extraction never guesses: a file it cannot read raises ``ExtractionError`` with the
reason shown to the user. Formats other than plain text live in sibling modules of
this package and are imported only when a file of their kind is read.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

KINDS = {".txt": "txt", ".md": "md", ".markdown": "md", ".pdf": "pdf", ".json": "json",
         ".docx": "docx", ".html": "html", ".htm": "html", ".xlsx": "xlsx", ".csv": "csv", ".pptx": "pptx",
         ".png": "image", ".jpg": "image", ".jpeg": "image", ".tif": "image", ".tiff": "image"}
MAX_HEADING_CHARS = 300
_FENCE = re.compile(r"^\s*(```|~~~)")


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
    """``notes``: what the file's report must say although it was read (parts left out, and why)."""

    title: str
    blocks: list[Block]
    notes: tuple[str, ...] = ()


def kind_of(path: Path) -> str | None:
    return KINDS.get(path.suffix.lower())


def extract(path: Path, data: bytes) -> Extracted:
    """Extract ``data`` (the bytes of ``path``) by file type."""
    kind = kind_of(path)
    if not data:
        raise ExtractionError("empty file (0 bytes)")
    if kind == "pdf":
        from sources.services.pdf import extract_pdf

        result = extract_pdf(data, fallback_title=path.stem)
    elif kind in _BINARY:
        result = _BINARY[kind](data, fallback_title=path.stem)
    elif kind in ("html", "csv"):
        result = _TEXT_FORMATS[kind](data, fallback_title=path.stem)
    elif kind == "json":
        from sources.services.extract.json_values import extract_json

        result = extract_json(_decode(data), fallback_title=path.stem)
    elif kind == "md":
        result = extract_markdown(_decode(data), fallback_title=path.stem)
    elif kind == "txt":
        result = extract_text(_decode(data), fallback_title=path.stem)
    else:
        raise ExtractionError(f"unsupported file type {path.suffix or '(none)'!r}")
    if not any(b.text.strip() for b in result.blocks):
        raise ExtractionError("no text found in the file")
    return result


def _docx(data: bytes, *, fallback_title: str) -> Extracted:
    from sources.services.extract.docx import extract_docx

    return extract_docx(data, fallback_title=fallback_title)


def _pptx(data: bytes, *, fallback_title: str) -> Extracted:
    from sources.services.extract.pptx import extract_pptx

    return extract_pptx(data, fallback_title=fallback_title)


def _xlsx(data: bytes, *, fallback_title: str) -> Extracted:
    from sources.services.extract.sheets import extract_xlsx

    return extract_xlsx(data, fallback_title=fallback_title)


def _html(data: bytes, *, fallback_title: str) -> Extracted:
    from sources.services.extract.html import extract_html

    return extract_html(data, fallback_title=fallback_title)


def _csv(data: bytes, *, fallback_title: str) -> Extracted:
    from sources.services.extract.sheets import extract_csv

    return extract_csv(_decode(data), fallback_title=fallback_title)


def _image(data: bytes, *, fallback_title: str) -> Extracted:
    from sources.services.extract.ocr import extract_image

    return extract_image(data, fallback_title=fallback_title)


_BINARY = {"docx": _docx, "pptx": _pptx, "xlsx": _xlsx, "image": _image}
_TEXT_FORMATS = {"html": _html, "csv": _csv}


def _decode(data: bytes) -> str:
    """Decode UTF-8 (with or without BOM); anything else is refused, not guessed."""
    if b"\x00" in data[:8192] and not data.startswith((b"\xff\xfe", b"\xfe\xff")):
        order = _utf16_order(data[:8192])
        if order:
            raise ExtractionError(f"UTF-16 ({order}) text without a byte-order mark; save it as UTF-8 "
                                  "(or as UTF-16 with a BOM)")
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


def _paragraphs(lines: list[str], first_line: int) -> list[tuple[str, int, int]]:
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


def extract_text(text: str, *, fallback_title: str) -> Extracted:
    lines = text.splitlines()
    blocks = [Block(t, (), None, s, e) for t, s, e in _paragraphs(lines, 1)]
    return Extracted(title=fallback_title, blocks=blocks)


def extract_markdown(text: str, *, fallback_title: str) -> Extracted:
    """Paragraph blocks under their heading path; fenced code stays in one block."""
    lines = text.splitlines()
    blocks: list[Block] = []
    path: list[tuple[int, str]] = []
    title = ""
    segment: list[str] = []
    segment_start = 1
    in_fence = False

    def flush(end_line: int) -> None:
        heading = tuple(h for _, h in path)
        for para, s, e in _paragraphs(segment, segment_start):
            blocks.append(Block(para, heading, None, s, e))

    for number, line in enumerate(lines, start=1):
        if _FENCE.match(line):
            in_fence = not in_fence
        heading = None if in_fence else _md_heading(line)
        if heading:
            flush(number - 1)
            level, name = heading
            path = [(lvl, h) for lvl, h in path if lvl < level] + [(level, name)]
            if level == 1 and not title:
                title = name
            segment, segment_start = [], number + 1
        else:
            segment.append(line)
    flush(len(lines))
    return Extracted(title=title or fallback_title, blocks=blocks)


def _md_heading(line: str) -> tuple[int, str] | None:
    """(level, name) when ``line`` is an ATX heading (``## Name ##``), else None.

    Plain string work on purpose: the regex this replaces (``(.+?)\\s*#*\\s*$``)
    backtracked cubically, so one 4 KB line of spaces took over a minute. A "heading"
    longer than MAX_HEADING_CHARS is kept as text: every chunk under a heading
    repeats it, so a 10 MB heading line would be stored thousands of times.
    """
    level = len(line) - len(line.lstrip("#"))
    if not 1 <= level <= 6 or line[level:level + 1] not in (" ", "\t"):
        return None
    name = line[level:].strip()
    closed = name.rstrip("#")
    if closed != name and (not closed or closed[-1] in " \t"):
        name = closed.rstrip()
    if not name or len(name) > MAX_HEADING_CHARS:
        return None
    return level, name


