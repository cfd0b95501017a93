"""Charts of Office files (.pptx, .docx, .xlsx) read from their chart parts (``c:chartSpace``) as tables.

A chart is its title over a table: a header row of the series' names (the category axis's title in the first
cell), then a row per category with each series' value under its name: the values the file stores with the chart
(its cache), so what the chart shows, never recomputed from the cells it was drawn from. A chart without a title
that shows one series is titled by the series' name, as Office draws it. Scatter and bubble charts take their x
values as the categories. The title and header lead every chunk of the chart's rows (``Block.lead``), as a table's
header does.
"""

from __future__ import annotations

import posixpath
import zipfile
from collections.abc import Callable
from dataclasses import dataclass

from lxml import etree

from sources.services.extract.blocks import Block, ExtractionError
from sources.services.extract.tables import row_text

C = "{http://schemas.openxmlformats.org/drawingml/2006/chart}"
A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
R = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}"
_PKG_REL = "{http://schemas.openxmlformats.org/package/2006/relationships}Relationship"
_XDR = "{http://schemas.openxmlformats.org/drawingml/2006/spreadsheetDrawing}"
MAX_POINTS = 100_000  # categories of one chart; a chart's cache claiming more is no chart a person reads
_PARSER = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=False, remove_comments=True)


@dataclass(frozen=True)
class Chart:
    title: str
    rows: list[list[str]]  # the header row (axis title, series names), then one row per category


Cells = Callable[[str], list[str]]  # a reference ("'Sales'!$B$2:$B$9") -> the values of its cells, in order


def chart_read(xml: bytes, *, where: str, cells: Cells | None = None) -> Chart:
    """The chart in a ``c:chartSpace`` part; ``where`` names it in an error ("slide 3"). ``cells`` reads the cells a
    series refers to where the chart stores no values of its own (a workbook's chart written without its cache)."""
    try:
        root = etree.fromstring(xml, _PARSER)
    except etree.XMLSyntaxError as exc:
        raise ExtractionError(f"damaged chart on {where}: {exc}") from None
    chart = root.find(C + "chart")
    if chart is None:
        return Chart("", [])
    series = [s for plot in chart.iterfind(C + "plotArea/*") for s in plot.iterfind(C + "ser")]
    names = [_text(s.find(C + "tx"), cells) for s in series]
    values = [_points(_first(s, "val", "yVal"), cells) for s in series]
    categories: dict[int, str] = {}
    for s in series:
        categories = categories or _points(_first(s, "cat", "xVal"), cells)
    indexes = sorted(set(categories) | {i for v in values for i in v})
    if len(indexes) > MAX_POINTS:
        raise ExtractionError(f"chart on {where} holds {len(indexes):,} points (more than {MAX_POINTS:,})")
    axis = _text(chart.find(f"{C}plotArea/{C}catAx/{C}title")) or _text(chart.find(f"{C}plotArea/{C}valAx/{C}title"))
    title = _text(chart.find(C + "title"))
    deleted = chart.find(C + "autoTitleDeleted")
    if not title and len(series) == 1 and (deleted is None or deleted.get("val") not in ("1", "true")):
        title = names[0]
    rows = [[axis, *names]] if series else []
    rows += [[categories.get(i, str(i + 1)), *(v.get(i, "") for v in values)] for i in indexes]
    return Chart(title, rows)


def chart_blocks(
    chart: Chart, *, heading: tuple[str, ...], page: int | None, first_line: int, unit: int, same_line: bool = False
) -> tuple[list[Block], int]:
    """The chart's blocks, one per category row led by its title and header, and the lines it takes: its title
    (when it has one), its header and each row a line from ``first_line``, or all on ``first_line`` with
    ``same_line`` (a sheet's chart, anchored at one row)."""
    header = row_text(chart.rows[0]) if chart.rows else ""
    lead = "\n".join(part for part in (chart.title, header) if part)
    if len(chart.rows) < 2:
        if not lead:
            return [], 0
        return [
            Block(lead, heading, page, first_line, first_line + (0 if same_line else lead.count("\n")), "", unit)
        ], (lead.count("\n") + 1)
    skip = lead.count("\n") + 1
    blocks = []
    for index, cells in enumerate(chart.rows[1:]):
        line = first_line if same_line else first_line + skip + index
        text = row_text(cells)
        if text:
            blocks.append(Block(text, heading, page, line, line, lead, unit))
    return blocks, skip + len(chart.rows) - 1


def _first(series: etree._Element, *names: str) -> etree._Element | None:
    return next((found for name in names if (found := series.find(C + name)) is not None), None)


def _text(element: etree._Element | None, cells: Cells | None = None) -> str:
    """A title's or series name's text: its rich text runs, else the cached value of the cell it refers to."""
    if element is None:
        return ""
    runs = [t.text or "" for t in element.iter(A + "t")]
    if not runs:
        runs = [v.text or "" for v in element.iter(C + "v")]
    ref = element.findtext(f"{C}strRef/{C}f")
    if not runs and ref and cells is not None:
        runs = cells(ref)[:1]
    return " ".join("".join(runs).split())


def _points(element: etree._Element | None, cells: Cells | None = None) -> dict[int, str]:
    """Index -> value of a series' values or categories, from their cache (the first level of a multi-level one),
    else from the cells they refer to."""
    if element is None:
        return {}
    cache = next(
        (c for c in element.iter(C + "strCache", C + "numCache", C + "lvl", C + "strLit", C + "numLit")),
        None,
    )
    ref = next((f.text for f in element.iter(C + "f") if f.text), None)
    if cache is None and ref and cells is not None:
        return {i: _number(value) for i, value in enumerate(cells(ref)[: MAX_POINTS + 1])}
    if cache is None:
        return {}
    out: dict[int, str] = {}
    for pt in cache.iterfind(C + "pt"):
        try:
            index = int(pt.get("idx", ""))
        except ValueError:
            continue
        out[index] = _number(" ".join((pt.findtext(C + "v") or "").split()))
    return out


def _number(value: str) -> str:
    """A cached value as a person reads it: "120" for "120.0"; text unchanged."""
    try:
        number = float(value)
    except ValueError:
        return value
    if number.is_integer() and abs(number) < 1e15 and "e" not in value.lower():
        return str(int(number))
    return value


def rels(archive: zipfile.ZipFile, part: str) -> dict[str, str]:
    """Relationship id -> the part it points to (a path in the archive) for ``part``; external targets left out."""
    folder, name = posixpath.split(part)
    path = posixpath.join(folder, "_rels", name + ".rels")
    if path not in archive.namelist():
        return {}
    root = etree.fromstring(archive.read(path), _PARSER)
    out = {}
    for rel in root.iter(_PKG_REL):
        if rel.get("TargetMode") == "External":
            continue
        target = rel.get("Target") or ""
        out[rel.get("Id") or ""] = (
            target.lstrip("/") if target.startswith("/") else posixpath.normpath(posixpath.join(folder, target))
        )
    return out


def sheet_charts(archive: zipfile.ZipFile, cells: Cells | None = None) -> list[tuple[str, int, Chart]]:
    """(sheet name, 1-based row the chart is anchored at, chart) of a workbook's charts, sheet by sheet in the
    workbook's order (chart sheets too: anchored at row 1)."""
    book = etree.fromstring(archive.read("xl/workbook.xml"), _PARSER)
    targets = rels(archive, "xl/workbook.xml")
    out: list[tuple[str, int, Chart]] = []
    for sheet in book.iter("{*}sheet"):
        name, part = sheet.get("name") or "", targets.get(sheet.get(R + "id") or "", "")
        for drawing in _drawings(archive, part):
            drawing_rels = rels(archive, drawing)
            root = etree.fromstring(archive.read(drawing), _PARSER)
            for anchor in root:
                row = anchor.findtext(f"{_XDR}from/{_XDR}row")
                for ref in anchor.iter(C + "chart"):
                    chart_part = drawing_rels.get(ref.get(R + "id") or "", "")
                    if chart_part in archive.namelist():
                        where = f"sheet {name!r}"
                        line = int(row) + 1 if row and row.isdigit() else 1
                        out.append((name, line, chart_read(archive.read(chart_part), where=where, cells=cells)))
    return out


def _drawings(archive: zipfile.ZipFile, part: str) -> list[str]:
    if part not in archive.namelist():
        return []
    root = etree.fromstring(archive.read(part), _PARSER)
    targets = rels(archive, part)
    found = [targets.get(d.get(R + "id") or "", "") for d in root.iter("{*}drawing")]
    return [d for d in found if d in archive.namelist()]
