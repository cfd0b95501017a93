"""PDF text per page with pypdf; the outline gives each page its heading path."""
from __future__ import annotations

import io
import logging

from pypdf import PdfReader
from pypdf.errors import DependencyError, FileNotDecryptedError, PdfReadError

from sources.services.extract import Block, Extracted, ExtractionError, _paragraphs

logger = logging.getLogger(__name__)


def extract_pdf(data: bytes, *, fallback_title: str) -> Extracted:
    """Blocks per page; lines are counted within each page's extracted text."""
    reader = _open(data)
    starts = _outline_starts(reader)
    blocks: list[Block] = []
    try:
        pages = list(reader.pages)
    except (PdfReadError, ValueError, KeyError, TypeError) as exc:
        raise ExtractionError(f"damaged PDF: cannot read its pages ({exc})") from None
    heading: tuple[str, ...] = ()
    for number, page in enumerate(pages, start=1):
        try:
            text = page.extract_text() or ""
        except Exception as exc:  # pypdf raises many types on damaged content streams; skip the page, say so
            logger.warning("pdf page %s not extracted: %s", number, type(exc).__name__)
            continue
        entries = starts.get(number, [])
        lines = text.splitlines()
        if entries and not any(_title_line(line, entries) for line in lines):
            heading = entries[-1][1]  # the outline says a section starts here, the text does not show where
        for segment_start, segment in _sections(lines, entries):
            heading = _title_line(segment[0], entries) or heading
            for para, start, end in _paragraphs(segment, segment_start):
                blocks.append(Block(para, heading, number, start, end))
    if not any(b.text.strip() for b in blocks):
        raise ExtractionError(f"PDF has no extractable text in {len(pages)} page(s) "
                              "(scanned images need OCR, which Foundry does not do)")
    return Extracted(title=_title(reader) or fallback_title, blocks=blocks)


def _open(data: bytes) -> PdfReader:
    if not data.lstrip()[:5].startswith(b"%PDF"):
        raise ExtractionError("not a PDF file (no %PDF header)")
    try:
        reader = PdfReader(io.BytesIO(data))
    except (PdfReadError, ValueError, KeyError, TypeError, IndexError) as exc:
        raise ExtractionError(f"damaged PDF: {exc}") from None
    if reader.is_encrypted:
        try:
            if not reader.decrypt(""):
                raise ExtractionError("encrypted PDF: a password is required")
        except (FileNotDecryptedError, NotImplementedError) as exc:
            raise ExtractionError(f"encrypted PDF: cannot decrypt ({exc})") from None
        except DependencyError as exc:
            raise ExtractionError(f"encrypted PDF: {exc}") from None
    return reader


def _title(reader: PdfReader) -> str:
    try:
        meta = reader.metadata
        title = (meta.title if meta else None) or ""
    except Exception:  # broken info dictionaries are common; the file name will do
        return ""
    return title.strip() if isinstance(title, str) else ""


def _title_line(line: str, entries: list[tuple[str, tuple[str, ...]]]) -> tuple[str, ...] | None:
    """The heading path of the outline entry whose title this line is, if any."""
    text = " ".join(line.split()).casefold()
    for title, path in entries:
        wanted = " ".join(title.split()).casefold()
        if text == wanted or (text.startswith(wanted) and len(text) <= len(wanted) + 3):
            return path
    return None


def _sections(lines: list[str], entries: list[tuple[str, tuple[str, ...]]]) -> list[tuple[int, list[str]]]:
    """Split a page's lines where a line is an outline title: (first line number, lines)."""
    out: list[tuple[int, list[str]]] = []
    start = 1
    for number, line in enumerate(lines, start=1):
        if number > start and _title_line(line, entries):
            out.append((start, lines[start - 1:number - 1]))
            start = number
    out.append((start, lines[start - 1:]))
    return [(first, seg) for first, seg in out if seg]


def _outline_starts(reader: PdfReader) -> dict[int, list[tuple[str, tuple[str, ...]]]]:
    """Page number -> outline entries (title, heading path) that start on it, in outline order."""
    starts: dict[int, list[tuple[str, tuple[str, ...]]]] = {}

    def walk(items: list, path: tuple[str, ...]) -> None:
        last: tuple[str, ...] = path
        for item in items:
            if isinstance(item, list):
                walk(item, last)
                continue
            try:
                page = reader.get_destination_page_number(item) + 1
                title = str(item.title).strip()
            except Exception:  # outlines pointing nowhere are common; skip that entry
                continue
            last = path + (title,)
            starts.setdefault(page, []).append((title, last))

    try:
        walk(reader.outline, ())
    except Exception:  # a broken outline must not cost the text
        logger.info("pdf outline unreadable")
        return {}
    return starts
