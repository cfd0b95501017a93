"""PDF extraction fidelity on real manuals: page furniture removed, body kept, and the section each line is cited in.

    .venv/bin/python bench/pdf_fidelity.py [--split tune|blind|all]

Furniture: ``bench/data/pdf_fidelity/furniture_labels.json`` lists, for a sample of pages of five real PDFs (R's
manuals and the Octave reference card in English, a German packaging guide, a Dutch LilyPond manual; licences in the
COPYRIGHT files beside them), which lines of pypdf's page text are running headers, footers or page numbers; every
other line of a sampled page is body. A line is removed when no block ``extract`` makes covers its number on the
page. Precision and recall are of removed lines against the labelled furniture; "body removed" counts labelled
body lines left out. The rules were chosen on the ``tune`` documents; the ``blind`` ones only report them.

Sections: in a PDF whose outline titles stand in its text as numbered headings ("3.2 Changing the length of an
object"), each body line's reference section is the last such heading line before it in reading order; a line is
right when its block's heading path ends in that section's title.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pypdf import PdfReader  # noqa: E402

from sources.services.extract.pdf_furniture import page_rotation  # noqa: E402
from sources.services.extract.pdf_text import pdf_page_lines  # noqa: E402

from sources.services.extract import extract  # noqa: E402

DATA = ROOT / "bench" / "data" / "pdf_fidelity"
SECTIONED = ("R-intro.pdf", "R-FAQ.pdf")  # outline titles stand in the text as numbered headings
_NUMBERED = re.compile(r"^(?:[\dA-Z]{1,3}(?:\.\d{1,3})*\.?)\s+")


def page_texts(path: Path) -> list[list[str]]:
    """Each page's lines as Foundry reads them (PDFium's, ``pdf_text``), before furniture is left out."""
    pages = PdfReader(path).pages
    read = pdf_page_lines(path.read_bytes(), [page_rotation(page) for page in pages])
    return [[line.text for line in lines or []] for lines in read]


def kept_lines(path: Path) -> tuple[dict[int, set[int]], dict[tuple[int, int], tuple[str, ...]]]:
    """Page -> line numbers some block covers; (page, line) -> the heading path of the block covering it."""
    kept: dict[int, set[int]] = {}
    heading: dict[tuple[int, int], tuple[str, ...]] = {}
    for block in extract(path, path.read_bytes()).blocks:
        assert block.page is not None
        for line in range(block.line_start, block.line_end + 1):
            kept.setdefault(block.page, set()).add(line)
            heading[(block.page, line)] = block.heading
    return kept, heading


def furniture(split: str) -> dict[str, Counter[str]]:
    labels = json.loads((DATA / "furniture_labels.json").read_text())["files"]
    totals: dict[str, Counter[str]] = {}
    for name, spec in labels.items():
        if split != "all" and spec["split"] != split:
            continue
        path = DATA / name
        texts = page_texts(path)
        kept, _ = kept_lines(path)
        count: Counter[str] = Counter()
        for page, wanted in spec["pages"].items():
            lines = texts[int(page) - 1]
            missing = set(wanted) - {line.strip() for line in lines}
            if missing:
                raise SystemExit(f"{name} page {page}: labelled lines not in its text: {sorted(missing)}")
            for number, line in enumerate(lines, start=1):
                if not line.strip():
                    continue
                is_furniture = line.strip() in wanted
                removed = number not in kept.get(int(page), set())
                count["furniture" if is_furniture else "body"] += 1
                count["removed"] += removed
                count["hit"] += removed and is_furniture
                count["body_removed"] += removed and not is_furniture
                if removed != is_furniture:
                    print(f"  {'missed' if is_furniture else 'BODY REMOVED'}: {name} p{page}: {line.strip()!r}")
        count["pages"] = len(spec["pages"])
        totals[name] = count
    return totals


def sections(name: str) -> Counter[str]:
    path = DATA / name
    reader = PdfReader(path)
    titles = _outline_titles(reader)
    _, heading = kept_lines(path)
    count: Counter[str] = Counter()
    current = ""
    for page, lines in enumerate(page_texts(path), start=1):
        for number, line in enumerate(lines, start=1):
            wrapped = " ".join(lines[number - 1 : number + 1])
            current = _heading_of(line, titles) or _heading_of(wrapped, titles) or current
            got = heading.get((page, number))
            if not current or got is None:
                continue
            count["lines"] += 1
            count["right"] += bool(got) and got[-1] == current
    return count


def _heading_of(line: str, titles: set[str]) -> str:
    """The outline title this line is a heading of: the title itself, or after a number or a word and a number
    ("3.2 Changing the length of an object", "Appendix A A sample session"); '' when none."""
    text = " ".join(line.split())
    bare = _NUMBERED.sub("", text, count=1)
    if text in titles or bare in titles:
        return text if text in titles else bare
    labelled = [t for t in titles if text.endswith(f" {t}") and len(text[: -len(t)].split()) == 1]
    return labelled[0] if labelled else ""


def _outline_titles(reader: PdfReader) -> set[str]:
    found: set[str] = set()

    def walk(items: list) -> None:
        for item in items:
            if isinstance(item, list):
                walk(item)
            else:
                found.add(" ".join(str(item.title).split()))

    walk(reader.outline)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=("tune", "blind", "all"), default="blind")
    args = parser.parse_args()
    totals = furniture(args.split)
    print(f"\nfurniture ({args.split}): file, pages, furniture lines, removed, precision, recall, body removed/body")
    overall: Counter[str] = Counter()
    for name, c in totals.items():
        overall.update(c)
        print(f"  {name:36} {_row(c)}")
    print(f"  {'all':36} {_row(overall)}")
    print("\nsections: file, body lines, cited in the section they stand in")
    for name in SECTIONED:
        c = sections(name)
        print(f"  {name:36} {c['lines']:5} {c['right'] / max(1, c['lines']):.1%}")


def _row(c: Counter[str]) -> str:
    precision = c["hit"] / c["removed"] if c["removed"] else 1.0
    recall = c["hit"] / c["furniture"] if c["furniture"] else 1.0
    return (
        f"{c['pages']:3} {c['furniture']:3} {c['removed']:3}  P {precision:.3f}  R {recall:.3f}  "
        f"body removed {c['body_removed']}/{c['body']}"
    )


if __name__ == "__main__":
    main()
