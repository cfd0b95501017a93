"""OCR word accuracy on pages rendered from text PDFs at 200 dpi, against the text the PDF holds.

    .venv/bin/python bench/ocr_accuracy.py [--first P] [--pages N] [PDF[=EXPECTED.txt] ...]

Each page is rendered with poppler's ``pdftoppm -r 200 -gray`` (Debian's poppler-utils) and read
by Foundry's OCR (``sources.services.extract.ocr``). The answer key is EXPECTED.txt when given,
else the PDF's own text layer (pypdf). Word accuracy = words of the key found in order in the OCR
text (difflib matching blocks) / words of the key, after NFKC, case folding and stripping
punctuation at word edges. Prints one JSON line per file and the total.
"""

from __future__ import annotations

import argparse
import difflib
import json
import subprocess
import sys
import tempfile
import time
import unicodedata
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pypdf import PdfReader  # noqa: E402

from sources.services.extract import ocr  # noqa: E402

EVAL = Path(__file__).resolve().parent.parent.parent / "shared" / "eval" / "pdfs"
DEFAULT = [
    f"{EVAL / 'edge' / 'crazyones.pdf'}={EVAL / 'edge' / 'crazyones.txt'}",
    *(str(p) for p in sorted((EVAL / "manuals").glob("*.pdf"))),
]


def words(text: str) -> list[str]:
    text = unicodedata.normalize("NFKC", text).casefold()
    return [w for w in (word.strip(".,;:!?()[]{}\"'`’‘“”*•-–—") for word in text.split()) if w]


def accuracy(key: str, got: str) -> tuple[int, int]:
    want, have = words(key), words(got)
    matcher = difflib.SequenceMatcher(a=want, b=have, autojunk=False)
    return sum(block.size for block in matcher.get_matching_blocks()), len(want)


def render(pdf: Path, page: int, folder: Path) -> bytes:
    stem = folder / f"p{page}"
    subprocess.run(
        [
            "pdftoppm",
            "-r",
            "200",
            "-gray",
            "-png",
            "-f",
            str(page),
            "-l",
            str(page),
            "-singlefile",
            str(pdf),
            str(stem),
        ],
        check=True,
        timeout=120,
    )
    return stem.with_suffix(".png").read_bytes()


def measure(pdf: Path, expected: Path | None, first: int, pages: int) -> dict:
    reader = PdfReader(pdf)
    first = min(first, len(reader.pages))
    numbers = range(first, min(first + pages, len(reader.pages) + 1))
    count = len(numbers)
    found = total = 0
    confidences = []
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        texts = []
        for number in numbers:
            image = ocr.image_open(render(pdf, number, Path(folder)), what=f"page {number}")
            page = ocr.ocr_page(image, what=f"page {number}")
            texts.append("\n".join(page.lines))
            confidences.append(page.confidence)
        got = "\n".join(texts)
    key = expected.read_text() if expected else "\n".join(reader.pages[i - 1].extract_text() or "" for i in numbers)
    found, total = accuracy(key, got)
    return {
        "file": pdf.name,
        "pages": f"{numbers[0]}-{numbers[-1]}",
        "key_words": total,
        "found": found,
        "word_accuracy": round(found / total, 4) if total else None,
        "mean_confidence": round(sum(confidences) / len(confidences), 1),
        "seconds_per_page": round((time.perf_counter() - start) / count, 2),
    }


def main(targets: list[str], first: int, pages: int) -> None:
    ocr.ocr_check()
    found = total = 0
    for target in targets:
        pdf, _, expected = target.partition("=")
        row = measure(Path(pdf), Path(expected) if expected else None, 1 if expected else first, pages)
        found, total = found + row["found"], total + row["key_words"]
        print(json.dumps(row))
    print(json.dumps({"total_key_words": total, "found": found, "word_accuracy": round(found / total, 4)}))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("targets", nargs="*", default=DEFAULT)
    parser.add_argument("--first", type=int, default=1, help="first page measured (a file with EXPECTED.txt: 1)")
    parser.add_argument("--pages", type=int, default=3, help="pages measured per PDF")
    options = parser.parse_args()
    main(options.targets, options.first, options.pages)
