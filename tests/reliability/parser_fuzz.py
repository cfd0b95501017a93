"""The parser fuzzer shared by ``test_parser_fuzz.py`` (a bounded run in CI) and ``bench/parser_fuzz.py`` (a long run).

Every extractor gets small seed files built here (no binary is committed) and hypothesis
mutations of them: bytes flipped, inserted, deleted or repeated, the file truncated, and for the
zip-based Office files the same done to one part inside a well-formed archive, so the XML
parsers are reached and not only the zip reader. The text formats also get random structure
(Markdown with headings, fences and tables; nested JSON; CSV with quotes and odd rows; nested
HTML). ``parse`` runs one file through what ingest runs before embedding (extract, chunk, the
sentence windows, the unit splitter) and says how it ended: read, refused with a reason
(``ExtractionError``), or a finding: a crash (any other exception), a hang, too much memory, or
chunks that break their own invariants.
"""

from __future__ import annotations

import csv
import io
import json
import signal
import time
import tracemalloc
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from core.units import passage_units
from sources.services.chunking import chunk_blocks, chunk_windows
from sources.services.extract import ExtractionError, extract

# A seed is a few kilobytes: a file of that size that takes this long, or holds this much memory
# at once, is pathological (the work is not bounded by the input), whatever the machine.
HANG_S = 30
MEMORY_BYTES = 256 * 1024 * 1024
WINDOW_SENTENCES = 3
WINDOW_LIMIT = 15


@dataclass(frozen=True)
class Outcome:
    status: str  # read | refused | crash | hang | memory | broken
    detail: str  # the reason, the exception or the broken invariant
    seconds: float
    peak_bytes: int

    @property
    def finding(self) -> bool:
        return self.status not in ("read", "refused")


class _Hang(BaseException):
    """Raised by the alarm; a BaseException so no ``except Exception`` in a parser swallows it."""


@contextmanager
def _alarm(seconds: int) -> Iterator[None]:
    def ring(signum: int, frame: Any) -> None:
        raise _Hang

    previous = signal.signal(signal.SIGALRM, ring)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def parse(name: str, data: bytes, *, count: Callable[[str], int], max_tokens: int) -> Outcome:
    """Run ``data`` as the file ``name`` through extract, chunking, windows and units; how it ended."""
    tracemalloc.start()
    started = time.perf_counter()
    status, detail = "read", ""
    try:
        with _alarm(HANG_S):
            extracted = extract(Path(name), data)
            drafts = chunk_blocks(extracted.blocks, max_tokens=max_tokens, count=count, overlap_tokens=max_tokens // 8)
            for draft in drafts:
                chunk_windows(draft.text, sentences=WINDOW_SENTENCES, limit=WINDOW_LIMIT)
                units = passage_units(draft.text)
                detail = detail or _broken(draft, units)
            status = "broken" if detail else "read"
    except ExtractionError as exc:
        status, detail = "refused", str(exc)
        if not detail.strip():
            status, detail = "broken", "ExtractionError without a reason"
    except _Hang:
        status, detail = "hang", f"still running after {HANG_S} s"
    except RecursionError as exc:
        status, detail = "crash", f"RecursionError: {exc}"
    except Exception as exc:
        status, detail = "crash", f"{type(exc).__name__}: {exc}"
    seconds = time.perf_counter() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    if status in ("read", "refused") and peak > MEMORY_BYTES:
        status, detail = "memory", f"{peak / 1048576:.0f} MB at once for a {len(data):,}-byte file"
    return Outcome(status, detail[:500], seconds, peak)


def _broken(draft: Any, units: list[Any]) -> str:
    """The chunk's invariants that do not hold, as a sentence; '' when all do."""
    if not draft.text.strip():
        return "an empty chunk"
    if draft.line_start < 1 or draft.line_end < draft.line_start:
        return f"chunk line span {draft.line_start}-{draft.line_end}"
    for unit in units:
        if draft.text[unit.start : unit.end] != unit.text:
            return f"unit {unit.text[:40]!r} is not the chunk's text at {unit.start}-{unit.end}"
    return ""


# --------------------------------------------------------------------------- seeds

MARKDOWN = """# Pump station manual

## Installation

Mount the pump on a level base. Connect 24 V DC to terminal X1.

- Brown: +24 V
- Blue: 0 V

| Parameter | Value |
|---|---|
| Flow rate | 40 l/min |
| Pressure | 6 bar |

```
set speed 1450
```

## Service

Replace the seal every 500 operating hours.
"""

JSON_DOC = {
    "model": "P-7",
    "ratings": {"flow_l_min": 40, "pressure_bar": 6.0, "voltage": "24 V DC"},
    "ports": [{"name": "inlet", "size_mm": 25}, {"name": "outlet", "size_mm": 20}],
    "notes": "Replace the seal every 500 operating hours.",
}

CSV_TEXT = 'model,flow l/min,pressure bar,note\nP-7,40,6,"seal, every 500 h"\nP-9,55,8,quiet\n'


def _png() -> bytes:
    from PIL import Image, ImageDraw

    image = Image.new("L", (120, 40), 255)
    ImageDraw.Draw(image).text((4, 12), "Pump P-7 40 l/min", fill=0)
    buffer = io.BytesIO()
    image.save(buffer, "PNG")
    return buffer.getvalue()


@cache
def seeds(folder: Path) -> dict[str, bytes]:
    """One small, good file of every kind ingest reads, by file name."""
    from tests.conftest import make_pdf
    from tests.sources.office_files import HTML, make_docx, make_pptx, make_xlsx

    folder.mkdir(parents=True, exist_ok=True)
    pdf = make_pdf(
        folder / "seed.pdf",
        [("1 Installation", "Mount the pump on a level base. " * 8), ("2 Service", "Replace the seal. " * 8)],
        footer_line="Page {page}",
    )
    return {
        "seed.pdf": pdf.read_bytes(),
        "seed.docx": make_docx(folder / "seed.docx").read_bytes(),
        "seed.pptx": make_pptx(folder / "seed.pptx").read_bytes(),
        "seed.xlsx": make_xlsx(folder / "seed.xlsx", rows=12).read_bytes(),
        "seed.csv": CSV_TEXT.encode(),
        "seed.html": HTML.encode(),
        "seed.json": json.dumps(JSON_DOC, indent=2).encode(),
        "seed.md": MARKDOWN.encode(),
        "seed.txt": MARKDOWN.replace("#", "").encode(),
        "seed.png": _png(),
    }


# --------------------------------------------------------------------------- mutations

OPERATIONS = ("flip", "insert", "delete", "repeat", "truncate")
INTERESTING = (b"\x00", b"\xff", b"\n", b"\r", b"<", b">", b"&", b'"', b"{", b"[", b"#", b"|", b"%", b"\xe2\x80")


@st.composite
def byte_mutations(draw: st.DrawFn, seed: bytes) -> bytes:
    """``seed`` with one to six mutations: bytes flipped, inserted, deleted or repeated, or the file cut short."""
    data = bytearray(seed)
    for _ in range(draw(st.integers(1, 6))):
        if not data:
            break
        op = draw(st.sampled_from(OPERATIONS))
        at = draw(st.integers(0, len(data) - 1))
        if op == "flip":
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif op == "insert":
            data[at:at] = draw(st.sampled_from(INTERESTING) | st.binary(min_size=1, max_size=16))
        elif op == "delete":
            del data[at : at + draw(st.integers(1, 64))]
        elif op == "repeat":
            piece = bytes(data[at : at + draw(st.integers(1, 256))])
            data[at:at] = piece * draw(st.integers(1, 50))
        else:
            del data[at:]
    return bytes(data)


@st.composite
def zip_part_mutations(draw: st.DrawFn, seed: bytes) -> bytes:
    """A well-formed archive in which one part (an XML document, a relationship list, …) has been mutated."""
    with zipfile.ZipFile(io.BytesIO(seed)) as archive:
        parts = {info.filename: archive.read(info) for info in archive.infolist()}
    name = draw(st.sampled_from(sorted(parts)))
    parts[name] = draw(byte_mutations(parts[name]))
    if draw(st.booleans()):
        parts.pop(draw(st.sampled_from(sorted(parts))))  # a part the others refer to may be missing
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for part, content in parts.items():
            archive.writestr(part, content)
    return out.getvalue()


_WORDS = st.sampled_from(["pump", "P-7", "40", "l/min", "6 bar", "seal", "24 V", "Ω", "é", "中文", "e.g.", "..."])
_TEXT = st.lists(_WORDS | st.text(max_size=12), max_size=12).map(" ".join)


def markdown_documents() -> st.SearchStrategy[str]:
    line = st.one_of(
        _TEXT,
        st.tuples(st.integers(1, 8), _TEXT).map(lambda t: "#" * t[0] + " " + t[1]),
        st.sampled_from(["```", "~~~", "", "---", "# ", "#", "| a | b |", "|---|---|", "- item", "1. step"]),
        st.lists(_TEXT, min_size=1, max_size=5).map(lambda cells: "| " + " | ".join(cells) + " |"),
        st.text(max_size=40),
    )
    return st.lists(line, min_size=1, max_size=60).map("\n".join)


def json_documents() -> st.SearchStrategy[str]:
    scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | _TEXT
    values = st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=6) | st.dictionaries(st.text(max_size=20), inner, max_size=6),
        max_leaves=60,
    )
    return values.map(lambda v: json.dumps(v, ensure_ascii=False))


def csv_documents() -> st.SearchStrategy[str]:
    cell = _TEXT | st.sampled_from(['"', '""', ",", "\n", "\r\n", ";", "\t", "=1+1"])
    rows = st.lists(st.lists(cell, max_size=8), min_size=1, max_size=30)

    def write(table: list[list[str]]) -> str:
        out = io.StringIO()
        csv.writer(out).writerows(table)
        return out.getvalue()

    return rows.map(write)


def html_documents() -> st.SearchStrategy[str]:
    tag = st.sampled_from(["div", "p", "h1", "h2", "h7", "table", "tr", "td", "th", "ul", "li", "script", "main", "b"])
    element = st.recursive(
        _TEXT.map(lambda t: t.replace("<", "&lt;")),
        lambda inner: st.tuples(tag, st.lists(inner, max_size=5), st.booleans()).map(
            lambda t: f"<{t[0]}>{''.join(t[1])}" + (f"</{t[0]}>" if t[2] else "")
        ),
        max_leaves=50,
    )
    return st.lists(element, min_size=1, max_size=8).map(lambda body: f"<html><body>{''.join(body)}</body></html>")


STRUCTURED: dict[str, Callable[[], st.SearchStrategy[str]]] = {
    "md": markdown_documents,
    "txt": markdown_documents,
    "json": json_documents,
    "csv": csv_documents,
    "html": html_documents,
}
ZIPPED = ("docx", "pptx", "xlsx")


def files(kind: str, seed: bytes) -> st.SearchStrategy[bytes]:
    """The fuzz inputs of one kind (its file suffix without the dot): mutations of its seed, and for the text
    formats random documents and mutations of those; for Office files mutations of the archive's parts too."""
    choices = [byte_mutations(seed)]
    if kind in ZIPPED:
        choices.append(zip_part_mutations(seed))
    if kind in STRUCTURED:
        documents = STRUCTURED[kind]().map(lambda text: text.encode())
        choices += [documents, documents.flatmap(byte_mutations)]
    return st.one_of(*choices)
