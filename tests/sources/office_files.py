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
