"""Small Office files built in tests (python-docx, python-pptx, openpyxl), so no binary is committed."""

from __future__ import annotations

import datetime as dt
import io
import zipfile
from pathlib import Path

HTML = """<!DOCTYPE html>
<html><head><title>Valve Guide</title><style>body { color: red }</style>
<script>document.write("script text")</script></head>
<body>
<nav><a href="/">Home</a> | <a href="/products">Products</a></nav>
<header><p>Site banner</p></header>
<h1>Valve V-200</h1>
<p>The valve opens at <b>3 bar</b>
and closes at 1 bar.</p>
<h2>Wiring</h2>
<ul><li>Brown: +24 V</li><li>Blue: 0 V</li></ul>
<iframe src="http://example.invalid/frame"></iframe>
<img src="data:image/png;base64,iVBORw0KGgo=" alt="diagram">
<table>
<tr><th>Model</th><th>Kv value</th></tr>
<tr><td>V-200</td><td>4.0<script>steal()</script></td></tr>
<tr><td>V-300</td><td>6.3</td></tr>
</table>
<footer>Copyright notice</footer>
</body></html>
"""


def make_docx(path: Path, *, title: str = "Pump Manual") -> Path:
    import docx

    document = docx.Document()
    document.core_properties.title = title
    document.add_heading("Installation", 1)
    document.add_paragraph("Mount the pump on a level concrete base.")
    document.add_heading("Power supply", 2)
    document.add_paragraph("Connect 24 V DC to terminal X1.", style="List Bullet")
    document.add_paragraph("Protect the supply with a 2 A fuse.", style="List Bullet")
    table = document.add_table(rows=3, cols=2)
    for r, (a, b) in enumerate([("Parameter", "Value"), ("Flow rate", "40 l/min"), ("Pressure", "6 bar")]):
        table.cell(r, 0).text, table.cell(r, 1).text = a, b
    document.add_heading("Safety", 1)
    document.add_paragraph("Keep the pump dry and disconnect power before service.")
    document.save(str(path))
    return path


def make_pptx(path: Path) -> Path:
    import pptx
    from pptx.util import Inches

    deck = pptx.Presentation()
    deck.core_properties.title = "Quarterly Review"
    agenda = deck.slides.add_slide(deck.slide_layouts[1])
    agenda.shapes.title.text = "Agenda"
    agenda.placeholders[1].text_frame.text = "Pump sales in the northern region"
    sub = agenda.placeholders[1].text_frame.add_paragraph()
    sub.text, sub.level = "Service contracts renewed", 1
    agenda.notes_slide.notes_text_frame.text = "Mention the flooded basement pump recall."
    figures = deck.slides.add_slide(deck.slide_layouts[5])
    figures.shapes.title.text = "Figures"
    table = figures.shapes.add_table(3, 2, Inches(1), Inches(2), Inches(4), Inches(2)).table
    for r, (a, b) in enumerate([("Region", "Units sold"), ("North", "120"), ("South", "95")]):
        table.cell(r, 0).text, table.cell(r, 1).text = a, b
    closing = deck.slides.add_slide(deck.slide_layouts[1])
    closing.shapes.title.text = "Agenda"
    closing.placeholders[1].text_frame.text = "Questions and answers"
    deck.save(str(path))
    return path


def make_xlsx(path: Path, *, rows: int = 60) -> Path:
    import openpyxl

    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "Pumps"
    sheet.append(["Model", "Flow (l/min)", "Pressure (bar)", "Since"])
    for i in range(1, rows + 1):
        sheet.append([f"P-{i}", 10 + i, 2.5 + i / 10, dt.date(2020, 1, i % 28 + 1)])
    sheet["F3"] = "=B3*2"  # never calculated by Excel: no cached value, so no text
    notes = book.create_sheet("Notes")
    notes["A1"], notes["A2"] = "Note", "Pumps P-1 to P-9 are discontinued"
    book.properties.title = "Pump table"
    book.save(str(path))
    return path


def zip_bytes(entries: dict[str, bytes], *, compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression) as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
    return buffer.getvalue()


W_NS = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
NUMBERING = f"""<w:abstractNum xmlns:w="{W_NS}" w:abstractNumId="90">
<w:lvl w:ilvl="0"><w:start w:val="1"/><w:numFmt w:val="decimal"/><w:lvlText w:val="%1."/></w:lvl>
<w:lvl w:ilvl="1"><w:start w:val="1"/><w:numFmt w:val="lowerLetter"/><w:lvlText w:val="%2)"/></w:lvl>
<w:lvl w:ilvl="2"><w:start w:val="1"/><w:numFmt w:val="decimal"/><w:lvlText w:val="%1.%3."/></w:lvl>
</w:abstractNum>"""


def add_numbering(document: object, *, restart_at: int = 1) -> tuple[int, int]:
    """An outline list ("1.", "a)", "1.1.") and a second list of it that restarts at ``restart_at``: their numIds."""
    from lxml import etree

    root = document.part.numbering_part.element  # type: ignore[attr-defined]
    root.insert(0, etree.fromstring(NUMBERING))
    for num_id, override in (
        (91, ""),
        (92, f'<w:lvlOverride w:ilvl="0"><w:startOverride w:val="{restart_at}"/></w:lvlOverride>'),
    ):
        root.append(
            etree.fromstring(
                f'<w:num xmlns:w="{W_NS}" w:numId="{num_id}"><w:abstractNumId w:val="90"/>{override}</w:num>'
            )
        )
    return 91, 92


def numbered(document: object, text: str, *, num_id: int, level: int = 0) -> None:
    from lxml import etree

    paragraph = document.add_paragraph(text)  # type: ignore[attr-defined]
    props = paragraph._p.get_or_add_pPr()
    props.append(
        etree.fromstring(f'<w:numPr xmlns:w="{W_NS}"><w:ilvl w:val="{level}"/><w:numId w:val="{num_id}"/></w:numPr>')
    )


def chart_xml(title: str, categories: list[str], series: dict[str, list[float]]) -> bytes:
    """A bar chart's ``c:chartSpace`` part as PowerPoint writes it (python-pptx), values cached in it."""
    from pptx.chart.data import CategoryChartData
    from pptx.chart.xmlwriter import ChartXmlWriter
    from pptx.enum.chart import XL_CHART_TYPE

    data = CategoryChartData()
    data.categories = categories
    for name, values in series.items():
        data.add_series(name, values)
    xml = ChartXmlWriter(XL_CHART_TYPE.COLUMN_CLUSTERED, data).xml
    rich = f"<c:title><c:tx><c:rich><a:bodyPr/><a:p><a:r><a:t>{title}</a:t></a:r></a:p></c:rich></c:tx></c:title>"
    return xml.replace("<c:chart>", f"<c:chart>{rich}", 1).encode()


def add_docx_chart(document: object, xml: bytes) -> None:
    """A paragraph holding a chart drawn from the chart part ``xml``, related as Word relates it."""
    from docx.opc.packuri import PackURI
    from docx.opc.part import Part
    from lxml import etree

    chart_type = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/chart"
    content_type = "application/vnd.openxmlformats-officedocument.drawingml.chart+xml"
    main = document.part  # type: ignore[attr-defined]
    part = Part(PackURI(f"/word/charts/chart{len(main.rels) + 1}.xml"), content_type, xml, main.package)
    rid = main.relate_to(part, chart_type)
    paragraph = document.add_paragraph()  # type: ignore[attr-defined]
    drawing = f"""<w:r xmlns:w="{W_NS}"><w:drawing><wp:inline
      xmlns:wp="http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing"
      xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main"><wp:extent cx="5000000" cy="3000000"/>
      <wp:docPr id="{len(main.rels) + 100}" name="Chart"/><a:graphic><a:graphicData
      uri="http://schemas.openxmlformats.org/drawingml/2006/chart"><c:chart
      xmlns:c="http://schemas.openxmlformats.org/drawingml/2006/chart"
      xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships" r:id="{rid}"/>
      </a:graphicData></a:graphic></wp:inline></w:drawing></w:r>"""
    paragraph._p.append(etree.fromstring(drawing))
