"""Word (.docx) with python-docx: headings from paragraph styles, paragraphs, lists and tables.

A list item reads as Word numbers it ("1.", "a)", "2.1."; ``docx_numbering``), a bullet as "- ".

Location: the heading path, and a paragraph range in ``line_start``/``line_end``. The
body's non-empty paragraphs other than headings are numbered from 1 in reading order and each
table row counts as one (and so do a chart's title, header and each of its rows: ``charts``), so "paragraphs
12-15" points to the same text in any copy of the file. Headers,
footers, comments and embedded objects are not read; macros are never run; links and
linked images are never fetched (python-docx does not resolve external relationships).
"""

from __future__ import annotations

import io
import re
from typing import TYPE_CHECKING

from sources.services.extract.blocks import MAX_HEADING_CHARS, Block, Extracted, ExtractionError, stated_date
from sources.services.extract.charts import C, R, chart_blocks, chart_read
from sources.services.extract.docx_numbering import Numbering
from sources.services.extract.office import office_check, office_errors
from sources.services.extract.tables import table_blocks

if TYPE_CHECKING:
    import docx.document
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    from sources.services.extract.charts import Chart

_HEADING_STYLE = re.compile(r"^heading\s*([1-9])$", re.IGNORECASE)


def extract_docx(data: bytes, *, fallback_title: str) -> Extracted:
    """Paragraph blocks under their heading path; each table row a block led by the table's header row."""
    office_check(data, kind="docx")
    import docx
    from docx.table import Table

    with office_errors("docx"):
        document = docx.Document(io.BytesIO(data))
        numbering = Numbering(document)
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
            for chart in _charts(document, item, number=number + 1):
                found, used = chart_blocks(chart, heading=heading, page=None, first_line=number + 1, unit=index)
                blocks += found
                number += used
            if not text:
                continue
            level = _heading_level(item)
            if level and len(text) <= MAX_HEADING_CHARS:
                path = [(lvl, name) for lvl, name in path if lvl < level] + [(level, " ".join(text.split()))]
                first_heading = first_heading or path[-1][1]
                continue
            number += 1
            blocks.append(Block(numbering.marker(item) + text, heading, None, number, number))
        core = document.core_properties
        title = (core.title or "").strip()
        issued = stated_date(core.modified, core.created)
    if not blocks:
        raise ExtractionError("Word document has no text (only headings, images or empty paragraphs)")
    return Extracted(title=title or first_heading or fallback_title, blocks=blocks, issued=issued)


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


def _charts(document: docx.document.Document, paragraph: Paragraph, *, number: int) -> list[Chart]:
    """The charts drawn in a paragraph, from the chart parts its drawings point to."""
    found = []
    for ref in paragraph._p.iter(C + "chart"):
        part = document.part.related_parts.get(ref.get(R + "id") or "")
        if part is not None:
            found.append(chart_read(part.blob, where=f"paragraph {number}"))
    return found


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
