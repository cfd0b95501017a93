"""Tables of every format as blocks: one block per row, led by the table's header row.

A row is a unit of its own ("rows as units with their header"): its cells joined by
`` | ``, with the header row as the block's ``lead`` so every chunk of the table's rows
starts with the header and a reader can tell which column a value is in.
"""

from __future__ import annotations

from core.units import CELL_SEPARATOR, names_columns
from sources.services.extract.blocks import Block


def row_text(cells: list[str]) -> str:
    """The cells of one row, trailing empty cells dropped; '' for an empty row."""
    while cells and not cells[-1]:
        cells = cells[:-1]
    return CELL_SEPARATOR.join(cells) if any(cells) else ""


def table_blocks(
    rows: list[list[str]],
    *,
    heading: tuple[str, ...],
    first_line: int,
    unit: int,
    page: int | None = None,
    lines: list[int] | None = None,
) -> list[Block]:
    """Blocks of one table: the first non-empty row is the header, each later row a block led by it.

    A row's location is ``first_line + index`` (paragraph or row numbers), or ``lines[index]``
    when the caller knows the line each row is on (HTML source lines).
    """
    blocks: list[Block] = []
    if _definitions(rows):
        for index, cells in enumerate(rows):
            line = lines[index] if lines is not None else first_line + index
            if any(cells):
                blocks.append(Block(f"{cells[0]}: {cells[1]}".rstrip(), heading, page, line, line, "", unit))
        return blocks
    header = ""
    for index, cells in enumerate(rows):
        text = row_text(cells)
        if not text:
            continue
        line = lines[index] if lines is not None else first_line + index
        if not header and len(rows) > 1:
            header = text
            continue
        blocks.append(Block(text, heading, page, line, line, header, unit))
    if header and not blocks:  # a table that is only a header row: keep its text
        line = lines[0] if lines else first_line
        blocks.append(Block(header, heading, page, line, line, "", unit))
    return blocks


def _definitions(rows: list[list[str]]) -> bool:
    """Two cells in every row, a term in the first of each (none empty), and no header row over them."""
    filled = [cells for cells in rows if any(cells)]
    return len(filled) > 1 and all(len(cells) == 2 and cells[0] for cells in filled) and not names_columns(filled[0])
