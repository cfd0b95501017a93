"""PowerPoint (.pptx) with python-pptx: one unit per slide (title, text frames, tables, charts, notes).

Location: the slide number as the page (shown like a page: "slide 3") and lines within
the slide's text, numbered in the order it is read: title, then shapes top to bottom and
left to right (groups opened), each table row one line, a chart's title, header and rows a line each
(``charts``), then the speaker notes. The
slide's title is its heading; a slide's blocks never share a chunk with another slide's.
Media, embedded objects and links are not read, fetched or run.
"""

from __future__ import annotations

import io
from collections.abc import Iterable
from typing import TYPE_CHECKING

from sources.services.extract.blocks import MAX_HEADING_CHARS, Block, Extracted, ExtractionError, stated_date
from sources.services.extract.charts import chart_blocks, chart_read
from sources.services.extract.office import office_check, office_errors
from sources.services.extract.tables import table_blocks

if TYPE_CHECKING:
    from pptx.shapes.base import BaseShape
    from pptx.slide import Slide

MAX_GROUP_DEPTH = 20


def extract_pptx(data: bytes, *, fallback_title: str) -> Extracted:
    """Blocks per slide, ``page`` = slide number; speaker notes last, under the heading "Notes"."""
    office_check(data, kind="pptx")
    import pptx

    blocks: list[Block] = []
    first_title = ""
    with office_errors("pptx"):
        deck = pptx.Presentation(io.BytesIO(data))
        for number, slide in enumerate(deck.slides, start=1):
            title = _slide_title(slide)
            first_title = first_title or title
            blocks += _slide_blocks(slide, number=number, title=title)
        core = deck.core_properties
        core_title = (core.title or "").strip()
        issued = stated_date(core.modified, core.created)
    if not blocks:
        raise ExtractionError("PowerPoint presentation has no text (no titles, text boxes, tables, charts or notes)")
    return Extracted(title=core_title or first_title or fallback_title, blocks=blocks, issued=issued)


def _slide_title(slide: Slide) -> str:
    shape = slide.shapes.title
    text = " ".join(shape.text_frame.text.split()) if shape is not None and shape.has_text_frame else ""
    return text if len(text) <= MAX_HEADING_CHARS else text[: MAX_HEADING_CHARS - 1] + "…"


def _slide_blocks(slide: Slide, *, number: int, title: str) -> list[Block]:
    from pptx.shapes.autoshape import Shape
    from pptx.shapes.graphfrm import GraphicFrame

    heading = (title,) if title else (f"Slide {number}",)
    blocks: list[Block] = []
    line = 1 if title else 0  # the title is line 1 of the slide
    title_id = slide.shapes.title.shape_id if slide.shapes.title is not None else None
    for shape in _shapes(slide.shapes, depth=0):
        if shape.shape_id == title_id and not shape.has_table:
            continue
        # Only a GraphicFrame can hold a table, and only a Shape a text frame (python-pptx's BaseShape
        # answers False to both).
        if isinstance(shape, GraphicFrame) and shape.has_table:
            rows = [[" ".join(cell.text.split()) for cell in row.cells] for row in shape.table.rows]
            blocks += table_blocks(rows, heading=heading, first_line=line + 1, unit=number, page=number)
            line += len(rows)
        elif isinstance(shape, GraphicFrame) and shape.has_chart:
            chart = chart_read(shape.chart_part.blob, where=f"slide {number}")
            found, used = chart_blocks(chart, heading=heading, page=number, first_line=line + 1, unit=number)
            blocks += found
            line += used
        elif isinstance(shape, Shape) and shape.has_text_frame:
            for paragraph in shape.text_frame.paragraphs:
                text = " ".join(paragraph.text.split())
                if text:
                    line += 1
                    bullet = "- " if paragraph.level > 0 else ""
                    blocks.append(Block(bullet + text, heading, number, line, line, "", number))
    if slide.has_notes_slide:
        notes = slide.notes_slide.notes_text_frame
        for paragraph in notes.paragraphs if notes is not None else []:
            text = " ".join(paragraph.text.split())
            if text:
                line += 1
                blocks.append(Block(text, heading + ("Notes",), number, line, line, "", number))
    if title and not blocks:  # a title-only slide still says something
        blocks.append(Block(title, heading, number, 1, 1, "", number))
    return blocks


def _shapes(shapes: Iterable[BaseShape], *, depth: int) -> list[BaseShape]:
    """Shapes in reading order (top to bottom, then left to right), groups opened."""
    if depth > MAX_GROUP_DEPTH:
        raise ExtractionError(f"PowerPoint shapes grouped deeper than {MAX_GROUP_DEPTH} levels")
    from pptx.shapes.group import GroupShape

    ordered = sorted(shapes, key=lambda s: (s.top or 0, s.left or 0))
    out: list[BaseShape] = []
    for shape in ordered:
        if isinstance(shape, GroupShape):
            out += _shapes(shape.shapes, depth=depth + 1)
        else:
            out.append(shape)
    return out
