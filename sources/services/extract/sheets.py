"""Spreadsheets: Excel (.xlsx, openpyxl read-only, cached values) and CSV.

Each row is a block led by its sheet's header row (the first non-empty row), so every
chunk of rows starts with the header. Location: the sheet name as the heading (none for
a CSV) and the row range in ``line_start``/``line_end`` (spreadsheet row numbers; for a
CSV, record numbers as a spreadsheet program shows them). A chart is a table of its own (``charts``) under its
sheet's name, at the row it is anchored at. Formulas are never evaluated: a cell shows the value Excel
saved with it, and a formula cell that was never calculated is empty.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import zipfile
from collections.abc import Iterator
from functools import partial
from typing import TYPE_CHECKING

from sources.services.extract.blocks import Block, Extracted, ExtractionError, stated_date
from sources.services.extract.charts import chart_blocks, sheet_charts
from sources.services.extract.office import office_check, office_errors
from sources.services.extract.tables import row_text

if TYPE_CHECKING:
    from openpyxl import Workbook

# Rows read (empty or not) across the workbook. A sheet whose used range claims a million
# rows is read row by row in constant memory, but a run must still end in bounded time.
MAX_ROWS = 1_048_576
MAX_CELLS = 5_000_000
MAX_COLUMNS = 1_000
MAX_CELL_CHARS = 10_000


def extract_xlsx(data: bytes, *, fallback_title: str) -> Extracted:
    """Row blocks of every worksheet, each led by that sheet's header row."""
    office_check(data, kind="xlsx")
    import openpyxl

    blocks: list[Block] = []
    with office_errors("xlsx"):
        book = openpyxl.load_workbook(
            io.BytesIO(data), read_only=True, data_only=True, keep_links=False, keep_vba=False
        )
        try:
            title = (book.properties.title or "").strip() if book.properties else ""
            issued = stated_date(book.properties.modified, book.properties.created) if book.properties else None
            cells = 0
            for unit, sheet in enumerate(book.worksheets, start=1):
                # The stored used range ("A1:XFD1048576") is not trusted: rows are as wide as their cells.
                sheet.reset_dimensions()
                rows = (
                    (number, [_cell(v) for v in values])
                    for number, values in enumerate(sheet.iter_rows(values_only=True), start=1)
                )
                cells = _rows_blocks(
                    rows, blocks, heading=(sheet.title,), unit=unit, cells=cells, where=f"sheet {sheet.title!r}"
                )
            with zipfile.ZipFile(io.BytesIO(data)) as archive:
                for index, (name, row, chart) in enumerate(sheet_charts(archive, partial(_range, book)), start=1):
                    found, _ = chart_blocks(
                        chart, heading=(name,), page=None, first_line=row, unit=-index, same_line=True
                    )
                    blocks += found
        finally:
            book.close()
    if not blocks:
        raise ExtractionError(
            "Excel workbook has no cell values or charts (empty sheets, or formulas never calculated: "
            "open and save it in Excel to store their values)"
        )
    return Extracted(title=title or fallback_title, blocks=blocks, issued=issued)


def extract_csv(text: str, *, fallback_title: str) -> Extracted:
    """Row blocks led by the header row; a row's location is its record number (the header is row 1)."""
    try:
        dialect: type[csv.Dialect] | csv.Dialect = csv.Sniffer().sniff(text[:8192], delimiters=",;\t|")
    except csv.Error:
        dialect = csv.excel
    reader = csv.reader(io.StringIO(text, newline=""), dialect)
    blocks: list[Block] = []
    try:
        _rows_blocks(_csv_rows(reader), blocks, heading=(), unit=1, cells=0, where="the file")
    except csv.Error as exc:
        raise ExtractionError(f"CSV cannot be read at line {reader.line_num}: {exc}") from None
    if not blocks:
        raise ExtractionError("CSV has no values")
    return Extracted(title=fallback_title, blocks=blocks)


def _csv_rows(reader: Iterator[list[str]]) -> Iterator[tuple[int, list[str]]]:
    """(row number, cells): rows are records, numbered as a spreadsheet shows the file (a quoted
    value may span lines, so a row number can be smaller than its line number)."""
    for number, values in enumerate(reader, start=1):
        yield number, [" ".join(v.split())[:MAX_CELL_CHARS] for v in values]


def _rows_blocks(
    rows: Iterator[tuple[int, list[str]]],
    blocks: list[Block],
    *,
    heading: tuple[str, ...],
    unit: int,
    cells: int,
    where: str,
) -> int:
    """Append one block per non-empty row after the header; returns the cells read so far."""
    header = ""
    for number, values in rows:
        cells += max(1, len(values))
        if number > MAX_ROWS or cells > MAX_CELLS:
            raise ExtractionError(
                f"spreadsheet too large: {where} goes past {min(number, MAX_ROWS):,} rows / "
                f"{MAX_CELLS:,} cells; split it or export the part that matters"
            )
        if len(values) > MAX_COLUMNS and any(values[MAX_COLUMNS:]):
            raise ExtractionError(
                f"spreadsheet too wide: {where} row {number} has values past column "
                f"{MAX_COLUMNS:,}; split it or export the part that matters"
            )
        text = row_text(values[:MAX_COLUMNS])
        if not text:
            continue
        if not header:
            header = text
            first = number
            continue
        blocks.append(Block(text, heading, None, number, number, header, unit))
    if header and not any(b.unit == unit and b.heading == heading for b in blocks[-1:]):
        blocks.append(Block(header, heading, None, first, first, "", unit))  # a sheet of one row
    return cells


def _range(book: Workbook, ref: str) -> list[str]:
    """The saved values of the cells a chart refers to ("'Sales'!$B$2:$B$9"), row by row; [] for a reference to
    no sheet of the book."""
    from openpyxl.utils.cell import range_to_tuple

    try:
        name, bounds = range_to_tuple(ref)
    except (ValueError, TypeError):
        return []
    if None in bounds:  # a whole column or row ("$B:$B"): no chart of cached values refers so
        return []
    min_col, min_row, max_col, max_row = (int(b or 0) for b in bounds)
    if name not in book.sheetnames or (max_row - min_row + 1) * (max_col - min_col + 1) > MAX_CELLS:
        return []
    rows = book[name].iter_rows(min_row=min_row, max_row=max_row, min_col=min_col, max_col=max_col, values_only=True)
    return [_cell(value) for row in rows for value in row]


def _cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ", timespec="seconds").removesuffix(" 00:00:00")
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return " ".join(str(value).split())[:MAX_CELL_CHARS]
