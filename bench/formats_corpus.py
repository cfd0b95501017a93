"""Write a folder of Word, HTML, PowerPoint, Excel and CSV files for the ingest throughput benchmark.

    .venv/bin/python bench/formats_corpus.py OUT_FOLDER [--copies N]
    .venv/bin/python bench/ingest_throughput.py OUT_FOLDER

The prose is the sample manual (knowledge_base/ax200-user-manual.md), its sections as Word
headings, HTML sections and slides; the tables are generated device inventories. Each copy
varies the text a little, so no two files are identical.
"""

from __future__ import annotations

import argparse
import csv
import html
import random
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def sections() -> list[tuple[int, str, list[str]]]:
    """(level, heading, paragraphs) of the sample manual."""
    out: list[tuple[int, str, list[str]]] = []
    text = (ROOT / "knowledge_base" / "ax200-user-manual.md").read_text()
    for block in re.split(r"\n\s*\n", text):
        block = block.strip()
        match = re.match(r"^(#+)\s+(.*)$", block)
        if match:
            out.append((len(match.group(1)), match.group(2), []))
        elif block and out:
            out[-1][2].append(" ".join(block.split()))
    return out


def write_docx(path: Path, parts: list[tuple[int, str, list[str]]], copy: int) -> None:
    import docx

    document = docx.Document()
    document.core_properties.title = f"AX-200 manual, copy {copy}"
    for level, heading, paragraphs in parts:
        document.add_heading(f"{heading} ({copy})", min(level, 9))
        for paragraph in paragraphs:
            document.add_paragraph(paragraph)
    document.save(str(path))


def write_html(path: Path, parts: list[tuple[int, str, list[str]]], copy: int) -> None:
    body = "".join(
        f"<h{min(level, 6)}>{html.escape(heading)} ({copy})</h{min(level, 6)}>"
        + "".join(f"<p>{html.escape(p)}</p>" for p in paragraphs)
        for level, heading, paragraphs in parts
    )
    path.write_text(
        f"<html><head><title>AX-200 manual {copy}</title></head><body><nav>Home</nav><main>{body}</main></body></html>"
    )


def write_pptx(path: Path, parts: list[tuple[int, str, list[str]]], copy: int) -> None:
    import pptx

    deck = pptx.Presentation()
    for _, heading, paragraphs in parts:
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = f"{heading} ({copy})"
        frame = slide.placeholders[1].text_frame
        frame.text = paragraphs[0] if paragraphs else heading
        for paragraph in paragraphs[1:]:
            frame.add_paragraph().text = paragraph
    deck.save(str(path))


def inventory(copy: int, rows: int) -> list[list[str]]:
    rng = random.Random(copy)
    sites = ["Hall A", "Hall B", "Pump house", "Boiler room", "Roof", "Warehouse"]
    out = [["Device", "Site", "IP address", "Firmware", "Sensors", "Last service", "Note"]]
    for i in range(1, rows + 1):
        out.append(
            [
                f"AX-200-{copy:02d}{i:04d}",
                rng.choice(sites),
                f"10.{copy}.{i // 250}.{i % 250 + 1}",
                f"2.{rng.randint(0, 6)}.{rng.randint(0, 9)}",
                str(rng.randint(1, 32)),
                f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
                rng.choice(["", "RS-485 termination on", "replaced antenna", "DHCP", "static address"]),
            ]
        )
    return out


def write_xlsx(path: Path, copy: int) -> None:
    import openpyxl

    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "Inventory"
    for row in inventory(copy, 600):
        sheet.append(row)
    book.save(str(path))


def main(out: Path, copies: int) -> None:
    out.mkdir(parents=True, exist_ok=True)
    parts = sections()
    for copy in range(1, copies + 1):
        write_docx(out / f"manual-{copy}.docx", parts, copy)
        write_html(out / f"manual-{copy}.html", parts, copy)
        write_pptx(out / f"manual-{copy}.pptx", parts, copy)
        write_xlsx(out / f"inventory-{copy}.xlsx", copy)
        with (out / f"inventory-{copy}.csv").open("w", newline="") as handle:
            csv.writer(handle).writerows(inventory(copy + 100, 600))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--copies", type=int, default=2)
    options = parser.parse_args()
    main(options.out, options.copies)
