"""Word (.docx) with python-docx: headings from paragraph styles, paragraphs, lists and tables.

Location: the heading path, and a paragraph range in ``line_start``/``line_end``. The
body's non-empty paragraphs other than headings are numbered from 1 in reading order and each
table row counts as one, so "paragraphs 12-15" points to the same text in any copy of the file. Headers,
footers, comments and embedded objects are not read; macros are never run; links and
linked images are never fetched (python-docx does not resolve external relationships).
"""

from __future__ import annotations

import io
import re
from typing import TYPE_CHECKING

from sources.services.extract.blocks import MAX_HEADING_CHARS, Block, Extracted, ExtractionError
from sources.services.extract.office import office_check, office_errors
from sources.services.extract.tables import table_blocks

if TYPE_CHECKING:
    from docx.table import Table
    from docx.text.paragraph import Paragraph

_HEADING_STYLE = re.compile(r"^heading\s*([1-9])$", re.IGNORECASE)


def extract_docx(data: bytes, *, fallback_title: str) -> Extracted:
    """Paragraph blocks under their heading path; each table row a block led by the table's header row."""
    office_check(data, kind="docx")
    import docx
    from docx.table import Table

    with office_errors("docx"):
        document = docx.Document(io.BytesIO(data))
        blocks: list[Block] = []
        path: list[tuple[int, str]] = []
        first_heading = ""
        number = 0
        for index, item in enumerate(document.iter_inner_content(), start=1):
            heading = tuple(name for _, name in path)
            if isinstance(item, Table):
                rows = _table_rows(item)
                blocks += table_blocks(rows, heading=heading, first_line=number + 1, unit=index)
                number += len(rows)
                continue
            text = item.text.strip()
            if not text:
                continue
            level = _heading_level(item)
            if level and len(text) <= MAX_HEADING_CHARS:
                path = [(lvl, name) for lvl, name in path if lvl < level] + [(level, " ".join(text.split()))]
                first_heading = first_heading or path[-1][1]
                continue
            number += 1
            blocks.append(Block(_list_marker(item) + text, heading, None, number, number))
        title = (document.core_properties.title or "").strip()
    if not blocks:
        raise ExtractionError("Word document has no text (only headings, images or empty paragraphs)")
    return Extracted(title=title or first_heading or fallback_title, blocks=blocks)


def _heading_level(paragraph: object) -> int:
    """1-9 for a Title/Heading N paragraph (or one whose style is based on one), else 0."""
    style = getattr(paragraph, "style", None)
    for _ in range(5):  # styles based on styles: a short chain, never a loop
        if style is None:
            return 0
        name = (style.name or "").strip()
        if name.lower() == "title":
            return 1
        match = _HEADING_STYLE.match(name)
        if match:
            return int(match.group(1))
        style = style.base_style
    return 0


def _list_marker(paragraph: Paragraph) -> str:
    """``- `` for a list item (a List style, or numbering set on the paragraph), else ''."""
    style = getattr(paragraph, "style", None)
    name = (style.name or "").lower() if style is not None else ""
    props = paragraph._p.pPr
    numbered = props is not None and props.numPr is not None
    return "- " if numbered or name.startswith("list") else ""


def _table_rows(table: Table) -> list[list[str]]:
    """Cell texts per row; a merged cell (the same cell repeated across the span) counts once."""
    rows: list[list[str]] = []
    for row in table.rows:
        cells: list[str] = []
        seen: set[int] = set()
        for cell in row.cells:
            if id(cell._tc) in seen:
                continue
            seen.add(id(cell._tc))
            cells.append(" ".join(cell.text.split()))
        rows.append(cells)
    return rows
