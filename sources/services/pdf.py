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
    headings = _page_headings(reader)
    blocks: list[Block] = []
    try:
        pages = list(reader.pages)
    except (PdfReadError, ValueError, KeyError, TypeError) as exc:
        raise ExtractionError(f"damaged PDF: cannot read its pages ({exc})") from None
    for number, page in enumerate(pages, start=1):
        try:
            text = page.extract_text() or ""
        except Exception as exc:  # pypdf raises many types on damaged content streams; skip the page, say so
            logger.warning("pdf page %s not extracted: %s", number, type(exc).__name__)
            continue
        heading = headings.get(number, ())
        for para, start, end in _paragraphs(text.splitlines(), 1):
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


def _page_headings(reader: PdfReader) -> dict[int, tuple[str, ...]]:
    """Map page number -> heading path of the last outline entry starting at or before it."""
    starts: list[tuple[int, tuple[str, ...]]] = []

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
            starts.append((page, last))

    try:
        walk(reader.outline, ())
    except Exception:  # a broken outline must not cost the text
        logger.info("pdf outline unreadable")
        return {}
    if not starts:
        return {}
    starts.sort(key=lambda s: s[0])
    result: dict[int, tuple[str, ...]] = {}
    current: tuple[str, ...] = ()
    index = 0
    for page in range(1, len(reader.pages) + 1):
        while index < len(starts) and starts[index][0] <= page:
            current = starts[index][1]
            index += 1
        result[page] = current
    return result
