"""PDF text per page with PDFium (``pdf_text``); pypdf reads the rest: the outline, which gives each line its heading
path (``pdf_outline``), the metadata, the tables' columns and the images of scanned pages.

A running header or footer (the document's name, "Page 2 of 3", the chapter's title and the page's number) is no
part of what the page says: found by where it stands and what it repeats (``pdf_furniture``), it is blanked, so
every other line keeps its number on the page.

A table's lines lose their columns in the page's text ("Power consumption (gateway only) - 2.5 4.0 W"). Read again
in pypdf's layout mode, which keeps each word where it stands, a header of short cells of words (``names_columns``)
over rows whose cells start where the header's do is a table: its lines are written with their cells joined by `` | ``
("Power consumption (gateway only) | - | 2.5 | 4.0 | W"), so a reader can tell the columns apart and read a row with
its header. Each stays on its line.
"""

from __future__ import annotations

import io
import logging
import re
import unicodedata
from datetime import datetime

from pypdf import PageObject, PdfReader
from pypdf.errors import DependencyError, FileNotDecryptedError, PdfReadError, PyPdfError

from core.units import names_columns
from sources.services.extract import ocr
from sources.services.extract.blocks import Block, Extracted, ExtractionError, paragraphs, stated_date
from sources.services.extract.pdf_furniture import Line, page_rotation, running_lines
from sources.services.extract.pdf_outline import outline_starts, section_starts, sections
from sources.services.extract.pdf_text import pdf_page_lines
from sources.services.extract.tables import row_text

logger = logging.getLogger(__name__)

_CELL = re.compile(r"\S+(?: {1,2}\S+)*")  # in layout mode, cells stand three or more spaces apart
COLUMN_SLACK = 1  # characters a cell may start off its header's column
ROW_GAP = 1  # blank layout lines between a table's rows (padded rows); a wider gap ends the table
_LIGATURES = {code: unicodedata.normalize("NFKC", chr(code)) for code in range(0xFB00, 0xFB07)}  # "ﬁ" -> "fi"


def extract_pdf(data: bytes, *, fallback_title: str) -> Extracted:
    """Blocks per page; lines are counted within each page's extracted text."""
    reader = _open(data)
    starts = outline_starts(reader)
    blocks: list[Block] = []
    try:
        pages = list(reader.pages)
    # PyPdfError covers PdfReadError and LimitReachedError (a page tree that refers to itself).
    except (PyPdfError, ValueError, KeyError, TypeError) as exc:
        raise ExtractionError(f"damaged PDF: cannot read its pages ({exc})") from None
    heading: tuple[str, ...] = ()
    scanned = _Scans()
    try:
        rotations = [page_rotation(page) for page in pages]
    except (PdfReadError, ValueError, KeyError, TypeError) as exc:
        raise ExtractionError(f"damaged PDF: cannot read its pages ({exc})") from None
    page_lines = pdf_page_lines(data, rotations)
    texts = {number: _page_text(page, number, page_lines[number - 1]) for number, page in enumerate(pages, start=1)}
    read = {number: lines for number, lines in texts.items() if lines and any(line.text.strip() for line in lines)}
    furniture = running_lines(read)
    for number, page in enumerate(pages, start=1):
        entries = starts.get(number, [])
        if texts[number] is None:
            continue
        if number not in read:
            page_heading = entries[-1].path if entries else heading
            blocks += scanned.page_blocks(page, number=number, heading=page_heading)
            continue
        lines = [Line("", None) if i in furniture[number] else line for i, line in enumerate(read[number])]
        page_starts = section_starts(lines, entries)
        for segment_start, segment, path in sections(lines, page_starts, heading):
            for para, start, end in paragraphs(segment, segment_start):
                blocks.append(Block(para, path, number, start, end))
        heading = page_starts[-1][1] if page_starts else heading
    if not any(b.text.strip() for b in blocks):
        if scanned.unread:
            raise ExtractionError(f"PDF page {scanned.unread[0]} is a scanned image and {scanned.no_ocr}")
        if scanned.pages:
            raise ExtractionError(
                f"PDF has no text layer, and OCR found no text in its {scanned.pages} scanned page(s)"
            )
        raise ExtractionError(f"PDF has no extractable text in {len(pages)} page(s), and no scanned page images")
    return Extracted(
        title=_title(reader) or fallback_title, blocks=blocks, notes=scanned.notes(), issued=_issued(reader)
    )


def _page_text(page: PageObject, number: int, lines: list[Line] | None) -> list[Line] | None:
    """The page's lines with their heights, its tables' lines in cells; None when PDFium cannot read it (logged,
    skipped)."""
    if lines is None:
        logger.warning("pdf page %s not extracted: PDFium cannot read it", number)
        return None
    if not any(line.text.strip() for line in lines):
        return lines
    try:
        layout = page.extract_text(extraction_mode="layout")
    except Exception as exc:  # the text is read; only its tables' columns are lost
        logger.warning("pdf page %s: tables not read (layout mode failed: %s)", number, type(exc).__name__)
        return lines
    cells = _tables_in_cells([line.text for line in lines], layout.splitlines())
    return [Line(text, line.y) for text, line in zip(cells, lines, strict=True)]


def _tables_in_cells(lines: list[str], layout: list[str]) -> list[str]:
    """``lines`` with each line of a table found in the ``layout`` lines written as its cells joined by `` | ``.

    A table is a header line of two or more short cells of words (``names_columns``) over one or more rows, each of
    two or more cells, every cell starting at one of the header's columns and the first at the first; a row may stand
    a blank line below the one before (a padded row). A table counts only where its lines stand, in order, among
    ``lines`` (the words alike): so two columns of prose, which the page's text reads one after the other, are no
    table.
    """
    out = list(lines)
    plain = [_words(line) for line in lines]
    i = after = 0  # the layout line read, the first line after the last table found
    while i < len(layout):
        table, used = _table_at(layout, i)
        if not table:
            i += 1
            continue
        words = [_words(" ".join(cell for cell in cells if cell)) for cells in table]
        at = next((j for j in range(after, len(plain) - len(words) + 1) if plain[j : j + len(words)] == words), None)
        if at is not None:
            out[at : at + len(table)] = [row_text([cell.translate(_LIGATURES) for cell in cells]) for cells in table]
            after = at + len(table)
        i += used
    return out


def _words(line: str) -> str:
    """A line's words, ligatures written out as PDFium writes them (pypdf's layout mode keeps "ﬁ")."""
    return " ".join(line.translate(_LIGATURES).split())


def _table_at(layout: list[str], i: int) -> tuple[list[list[str]], int]:
    """The cells of each line of the table whose header is ``layout[i]`` and how many layout lines it takes;
    ([], 0) when no table starts there."""
    header = [(m.start(), m[0]) for m in _CELL.finditer(layout[i])]
    if not names_columns([cell for _, cell in header]):
        return [], 0
    columns = [start for start, _ in header]
    table, used, blank = [[cell for _, cell in header]], 1, 0
    for line in layout[i + 1 :]:
        if not line.strip():
            blank += 1
            if blank > ROW_GAP:
                break
            continue
        cells = _row_cells(line, columns)
        if not cells:
            break
        table.append(cells)
        used += blank + 1
        blank = 0
    return (table, used) if len(table) > 1 else ([], 0)


def _row_cells(line: str, columns: list[int]) -> list[str]:
    """The cells of a layout line under a header whose cells start at ``columns``: [] unless it holds two or more,
    each at a column of its own, the first at the first."""
    cells = [""] * len(columns)
    found = list(_CELL.finditer(line))
    for m in found:
        column = next((c for c, start in enumerate(columns) if abs(m.start() - start) <= COLUMN_SLACK), None)
        if column is None or cells[column]:
            return []
        cells[column] = m[0]
    return cells if len(found) >= 2 and cells[0] else []


class _Scans:
    """OCR of the pages that have no text layer but images (scanned pages); pages with text are never OCR'd.

    Without tesseract, a PDF whose every page is scanned fails with a reason naming the packages;
    in a PDF with a text layer elsewhere, its image-only pages (a scan, a full-page figure) are left
    out and the file's report says which and why (``notes``). A page with neither text nor images
    is blank and gives nothing.
    """

    def __init__(self) -> None:
        self.pages = 0
        self.checked = False
        self.no_ocr = ""  # why OCR cannot run here, once found out
        self.unread: list[int] = []  # image-only pages left unread for that reason

    def notes(self) -> tuple[str, ...]:
        if not self.unread:
            return ()
        listed = ", ".join(map(str, self.unread[:20])) + (" …" if len(self.unread) > 20 else "")
        return (f"PDF page(s) {listed} hold only images and were not read; reading them {self.no_ocr}",)

    def page_blocks(self, page: PageObject, *, number: int, heading: tuple[str, ...]) -> list[Block]:
        try:
            _image_sizes_check(page, number=number, limit=ocr.MAX_PIXELS)
            images = list(page.images)
        except ExtractionError:
            raise
        except Exception as exc:  # damaged image streams raise many types; the page is then unreadable
            raise ExtractionError(
                f"PDF page {number} has no text layer and its images cannot be read ({type(exc).__name__})"
            ) from None
        if not images:
            return []
        self.pages += 1
        if not self.checked:
            try:
                ocr.ocr_check()
            except ExtractionError as exc:
                self.no_ocr = str(exc)
            self.checked = True
        if self.no_ocr:
            self.unread.append(number)
            return []
        blocks: list[Block] = []
        for index, found in enumerate(images, start=1):
            what = f"page {number}" + (f" (image {index})" if len(images) > 1 else "")
            image = ocr.image_open(found.data, what=what)
            result = ocr.ocr_page(image, what=what)
            start = (blocks[-1].line_end + 2) if blocks else 1
            blocks += [
                Block(b.text, heading, number, b.line_start + start - 1, b.line_end + start - 1, ocr=b.ocr)
                for b in ocr.page_blocks(result, number=number)
            ]
        return blocks


def _open(data: bytes) -> PdfReader:
    if not data.lstrip()[:5].startswith(b"%PDF"):
        raise ExtractionError("not a PDF file (no %PDF header)")
    try:
        reader = PdfReader(io.BytesIO(data))
    except (PyPdfError, ValueError, KeyError, TypeError, IndexError) as exc:
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


def _issued(reader: PdfReader) -> datetime | None:
    """The info dictionary's ModDate, else its CreationDate (a malformed date counts as none)."""
    try:
        meta = reader.metadata
    except Exception:  # broken info dictionaries are common, as in _title
        return None
    if meta is None:
        return None
    dates = []
    for name in ("modification_date", "creation_date"):
        try:
            dates.append(getattr(meta, name))
        except (ValueError, TypeError, PyPdfError):  # a date string pypdf cannot parse
            continue
    return stated_date(*dates)


def _image_sizes_check(page: PageObject, *, number: int, limit: int) -> None:
    """Refuse a page whose image XObjects declare more than ``limit`` pixels, before pypdf decodes them
    (it inflates an image whole to hand it over)."""
    resources = page.get("/Resources") or {}
    objects = resources.get("/XObject") or {}
    for name in list(objects.keys())[:1000]:
        xobject = objects[name].get_object()
        if xobject.get("/Subtype") != "/Image":
            continue
        width, height = int(xobject.get("/Width", 0)), int(xobject.get("/Height", 0))
        if width * height > limit:
            raise ExtractionError(
                f"PDF page {number} is a scanned image of {width:,} × {height:,} pixels, too "
                f"large to OCR (more than {limit // 1_000_000} million pixels)"
            )
