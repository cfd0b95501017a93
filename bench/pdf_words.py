"""PDF text against poppler's ``pdftotext`` as a reference: pypdf's plain mode (what Foundry reads) and layout mode.

    apt-get install poppler-utils   # pdftotext, the reference; Foundry does not use it
    .venv/bin/python bench/pdf_words.py

On the PDFs of ``bench/data/pdf_fidelity/`` (licences in the COPYRIGHT files there), page by page: word agreement =
the reference's words found in order in the candidate's (difflib matching blocks) / the reference's words; the mean
word length and the share of "words" of 25 characters or more (words run together: missing spaces); and how many
of the reference's words holding ``_`` (identifiers) the candidate has.
"""

from __future__ import annotations

import difflib
import subprocess
import sys
from collections import Counter
from pathlib import Path

from pypdf import PdfReader

DATA = Path(__file__).resolve().parent / "data" / "pdf_fidelity"
LONG = 25  # characters: a "word" this long is mostly words run together


def reference(path: Path, pages: int) -> list[list[str]]:
    out = subprocess.run(["pdftotext", "-enc", "UTF-8", str(path), "-"], capture_output=True, text=True, check=True)
    texts = out.stdout.split("\f")
    return [texts[i].split() if i < len(texts) else [] for i in range(pages)]


def main() -> None:
    print("file, mode: agreement with pdftotext, mean word length, words >= 25 chars, identifiers with _ kept")
    for path in sorted(DATA.glob("*.pdf")):
        reader = PdfReader(path)
        ref = reference(path, len(reader.pages))
        for mode in ("reference", "plain", "layout"):
            c: Counter[str] = Counter()
            for page, wanted in zip(reader.pages, ref, strict=True):
                if mode == "reference":
                    words = wanted
                elif mode == "layout":
                    words = (page.extract_text(extraction_mode="layout") or "").split()
                else:
                    words = (page.extract_text() or "").split()
                matcher = difflib.SequenceMatcher(None, wanted, words, autojunk=False)
                c["ref"] += len(wanted)
                c["hit"] += sum(block.size for block in matcher.get_matching_blocks())
                c["words"] += len(words)
                c["chars"] += sum(len(w) for w in words)
                c["long"] += sum(len(w) >= LONG for w in words)
                ids = {w for w in wanted if "_" in w}
                c["ids"] += len(ids)
                c["ids_kept"] += len(ids & set(words))
            print(
                f"  {path.name:34} {mode:9} {c['hit'] / max(1, c['ref']):6.1%}  {c['chars'] / max(1, c['words']):4.1f}"
                f"  {c['long'] / max(1, c['words']):5.1%}  {c['ids_kept']}/{c['ids']}"
            )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
