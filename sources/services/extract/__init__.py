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
from pathlib import Path

from core.units import is_decoration, text_title

from sources.services.extract.blocks import (
    KINDS,
    MAX_HEADING_CHARS,
    Block,
    Extracted,
    ExtractionError,
    decode_text,
    kind_of,
    paragraphs,
)

__all__ = [
    "KINDS",
    "MAX_HEADING_CHARS",
    "Block",
    "Extracted",
    "ExtractionError",
    "extract",
    "extract_markdown",
    "extract_text",
    "kind_of",
]

_FENCE = re.compile(r"^\s*(```|~~~)")


def extract(path: Path, data: bytes) -> Extracted:
    """Extract ``data`` (the bytes of ``path``) by file type."""
    kind = kind_of(path)
    if not data:
        raise ExtractionError("empty file (0 bytes)")
    if kind == "pdf":
        from sources.services.extract.pdf import extract_pdf

        result = extract_pdf(data, fallback_title=path.stem)
    elif kind in _BINARY:
        result = _BINARY[kind](data, fallback_title=path.stem)
    elif kind in ("html", "csv"):
        result = _TEXT_FORMATS[kind](data, fallback_title=path.stem)
    elif kind == "json":
        from sources.services.extract.json_values import extract_json

        result = extract_json(decode_text(data), fallback_title=path.stem)
    elif kind == "md":
        result = extract_markdown(decode_text(data), fallback_title=path.stem)
    elif kind == "txt":
        result = extract_text(decode_text(data), fallback_title=path.stem)
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

    return extract_csv(decode_text(data), fallback_title=fallback_title)


def _image(data: bytes, *, fallback_title: str) -> Extracted:
    from sources.services.extract.ocr import extract_image

    return extract_image(data, fallback_title=fallback_title)


_BINARY = {"docx": _docx, "pptx": _pptx, "xlsx": _xlsx, "image": _image}
_TEXT_FORMATS = {"html": _html, "csv": _csv}


def extract_text(text: str, *, fallback_title: str) -> Extracted:
    """Paragraph blocks; the title is the first line when it names the document (``text_title``: "Pump Controller
    - Firmware Release Notes" above the maker's name), else the file's name. The line stays
    in the text."""
    lines = text.splitlines()
    blocks = [Block(t, (), None, s, e) for t, s, e in paragraphs(lines, 1)]
    return Extracted(title=text_title(_opening(blocks)) or fallback_title, blocks=blocks)


def _opening(blocks: list[Block]) -> str:
    """The text up to and with the first block that says something: blocks of decoration lines before it skipped."""
    opening = []
    for block in blocks:
        opening.append(block.text)
        if not all(is_decoration(line) for line in block.text.splitlines() if line.strip()):
            break
    return "\n\n".join(opening)


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
        for para, s, e in paragraphs(segment, segment_start):
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
    if not 1 <= level <= 6 or line[level : level + 1] not in (" ", "\t"):
        return None
    name = line[level:].strip()
    closed = name.rstrip("#")
    if closed != name and (not closed or closed[-1] in " \t"):
        name = closed.rstrip()
    # A rule drawn as a heading (``# =====``) names nothing: it stays text, and the heading under it titles.
    if not name or len(name) > MAX_HEADING_CHARS or is_decoration(name):
        return None
    return level, name
