"""PDF text against poppler's ``pdftotext`` as a reference: pypdf's plain and layout modes, pdfminer.six, pypdfium2's
page text, and Foundry's lines (``pdf_text``: PDFium's characters, a word broken at a line's end kept as printed).

    apt-get install poppler-utils   # pdftotext, the reference; Foundry does not use it
    .venv/bin/pip install -r requirements/dev.txt   # pdfminer.six, a candidate only here
    .venv/bin/python bench/pdf_words.py

On the PDFs of ``bench/data/pdf_fidelity/`` (licences in the COPYRIGHT files there), page by page: word agreement =
the reference's words found in order in the candidate's (difflib matching blocks) / the reference's words; the mean
word length and the share of "words" of 25 characters or more (words run together: missing spaces); how many
of the reference's words holding ``_`` (identifiers) the candidate has; words holding a ligature character
(U+FB00-FB06: "ﬁ" in place of "fi", which no search for "fi" finds); words ending in a hyphen (a word broken at a
line's end, left broken); and seconds per page.
"""

from __future__ import annotations

import difflib
import logging
import re
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from pypdf import PdfReader

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sources.services.extract.pdf_text import pdf_page_lines  # noqa: E402

DATA = Path(__file__).resolve().parent / "data" / "pdf_fidelity"
LONG = 25  # characters: a "word" this long is mostly words run together
LIGATURE = re.compile("[\ufb00-\ufb06]")
BROKEN = ("-", "\u00ad", "\x02")  # hyphen, soft hyphen, and the mark pdfium gives a soft hyphen at a line's end


def reference(path: Path, pages: int) -> list[list[str]]:
    out = subprocess.run(["pdftotext", "-enc", "UTF-8", str(path), "-"], capture_output=True, text=True, check=True)
    texts = out.stdout.split("\f")
    return [texts[i].split() if i < len(texts) else [] for i in range(pages)]


def pypdf_pages(path: Path, *, mode: str) -> list[str]:
    return [page.extract_text(extraction_mode=mode) or "" for page in PdfReader(path).pages]


def pdfminer_pages(path: Path) -> list[str]:
    from pdfminer.high_level import extract_pages
    from pdfminer.layout import LTTextContainer

    return [
        "".join(item.get_text() for item in layout if isinstance(item, LTTextContainer))
        for layout in extract_pages(str(path))
    ]


def pdfium_pages(path: Path) -> list[str]:
    import pypdfium2

    document = pypdfium2.PdfDocument(str(path))
    try:
        return [document[i].get_textpage().get_text_bounded() for i in range(len(document))]
    finally:
        document.close()


def foundry_pages(path: Path) -> list[str]:
    count = len(PdfReader(path).pages)
    pages = pdf_page_lines(path.read_bytes(), [0] * count)
    return ["\n".join(line.text for line in lines or []) for lines in pages]


CANDIDATES: dict[str, Callable[[Path], list[str]]] = {
    "pypdf": lambda p: pypdf_pages(p, mode="plain"),
    "pypdf-layout": lambda p: pypdf_pages(p, mode="layout"),
    "pdfminer": pdfminer_pages,
    "pypdfium2": pdfium_pages,
    "foundry": foundry_pages,
}


def score(ref: list[list[str]], pages: list[str]) -> Counter[str]:
    c: Counter[str] = Counter()
    for i, wanted in enumerate(ref):
        words = pages[i].split() if i < len(pages) else []
        matcher = difflib.SequenceMatcher(None, wanted, words, autojunk=False)
        c["ref"] += len(wanted)
        c["hit"] += sum(block.size for block in matcher.get_matching_blocks())
        c["words"] += len(words)
        c["chars"] += sum(len(w) for w in words)
        c["long"] += sum(len(w) >= LONG for w in words)
        c["ligature"] += sum(bool(LIGATURE.search(w)) for w in words)
        c["broken"] += sum(w.endswith(BROKEN) for w in words)
        ids = {w for w in wanted if "_" in w}
        c["ids"] += len(ids)
        c["ids_kept"] += len(ids & set(words))
    return c


def main() -> None:
    logging.getLogger("pdfminer").setLevel(logging.ERROR)  # a warning per font without fontTools, not a result
    print(
        "file, extractor: agreement with pdftotext, mean word length, words >= 25 chars, identifiers with _ kept, "
        "words with a ligature, words ending in a hyphen, s/page"
    )
    total: dict[str, Counter[str]] = {}
    for path in sorted(DATA.glob("*.pdf")):
        count = len(PdfReader(path).pages)
        ref = reference(path, count)
        rows = {"pdftotext": (score(ref, [" ".join(words) for words in ref]), 0.0)}
        for name, read in CANDIDATES.items():
            began = time.perf_counter()
            pages = read(path)
            rows[name] = (score(ref, pages), (time.perf_counter() - began) / count)
        for name, (c, seconds) in rows.items():
            total.setdefault(name, Counter()).update(c)
            print(
                f"  {path.name:34} {name:12} {c['hit'] / max(1, c['ref']):6.1%}  {c['chars'] / max(1, c['words']):4.1f}"
                f"  {c['long'] / max(1, c['words']):5.1%}  {c['ids_kept']}/{c['ids']}  {c['ligature']:4}"
                f"  {c['broken']:4}  {seconds:.3f}"
            )
    for name, c in total.items():
        print(f"  {'all':34} {name:12} {c['hit'] / max(1, c['ref']):6.1%}  {c['ids_kept']}/{c['ids']}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
