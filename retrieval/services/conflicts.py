"""Contradictions between sources, shown before any answer or document.

Two detectors. The rule detector needs no LLM: the same quantity (``VCC``,
``max_sensors`` …) stated with different values by different sources, after
unit normalisation, so ``3.3 V`` and ``3300 mV`` agree. The LLM detector runs
when a scorer model is configured; a pair it reports is kept only if both
quotes really occur in the cited passages.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

from core import llm, prompts

UNITS: dict[str, tuple[str, float]] = {
    "v": ("V", 1.0),
    "mv": ("V", 1e-3),
    "kv": ("V", 1e3),
    "a": ("A", 1.0),
    "ma": ("A", 1e-3),
    "µa": ("A", 1e-6),
    "ua": ("A", 1e-6),
    "w": ("W", 1.0),
    "mw": ("W", 1e-3),
    "kw": ("W", 1e3),
    "hz": ("Hz", 1.0),
    "khz": ("Hz", 1e3),
    "mhz": ("Hz", 1e6),
    "ghz": ("Hz", 1e9),
    "°c": ("C", 1.0),
    "c": ("C", 1.0),
    "s": ("s", 1.0),
    "ms": ("s", 1e-3),
    "min": ("s", 60.0),
    "kb": ("B", 1e3),
    "mb": ("B", 1e6),
    "gb": ("B", 1e9),
    "%": ("%", 1.0),
    "ohm": ("ohm", 1.0),
    "kbit/s": ("bit/s", 1e3),
    "mbit/s": ("bit/s", 1e6),
    "bar": ("bar", 1.0),
    "mm": ("m", 1e-3),
}
_UNIT_RE = "|".join(sorted((re.escape(u) for u in UNITS), key=len, reverse=True))
_STATEMENT = re.compile(
    r"(?P<name>\b[A-Za-z][A-Za-z0-9_]{0,30})\s*(?P<op>=|:|\bis\b|\bof\b)\s*"
    r"(?P<value>[-+]?\d+(?:[.,]\d+)?)\s*(?P<unit>" + _UNIT_RE + r")(?![A-Za-z0-9])",
    re.IGNORECASE,
)
_SYMBOL = re.compile(r"^[A-Z][A-Z0-9_]+$")
HINT = "Check the source hierarchy in your feature spec."  # what a document's writer can do
ANSWER_HINT = "Check which source applies to your device before relying on either value."  # what an asker can do


@dataclass(frozen=True)
class Passage:
    label: str  # S1, S2 …
    source: str  # path relative to the knowledge base
    where: str  # section / page
    text: str
    chunk_id: int = 0  # the chunk the passage is, so a side of a conflict can be shown at its lines
    line_start: int = 0  # the chunk's first line in its source
    dated: str = ""  # the source's date (``Source.dated``, YYYY-MM-DD), "" when undated


@dataclass(frozen=True)
class Statement:
    quantity: str
    value: float
    dimension: str
    quote: str


@dataclass(frozen=True)
class Conflict:
    quantity: str
    a: dict
    b: dict
    detector: str

    def as_dict(self) -> dict:
        return asdict(self)


def statements(text: str) -> list[Statement]:
    """Quantity statements such as ``VCC = 3.3 V`` or ``VCC is 5 V``."""
    out = []
    for m in _STATEMENT.finditer(text):
        name, op = m.group("name"), m.group("op").lower()
        if op in ("is", "of") and not _SYMBOL.match(name):
            continue  # "supply is 12 V" names no quantity; "VCC is 5 V" does
        dimension, factor = UNITS[m.group("unit").lower()]
        value = round(float(m.group("value").replace(",", ".")) * factor, 12)
        out.append(Statement(name.upper(), value, dimension, " ".join(m.group(0).split())))
    return out


def _side(p: Passage, quote: str) -> dict:
    side = {"label": p.label, "source": p.source, "where": p.where, "quote": quote, "dated": p.dated}
    lines = _quote_lines(p, quote)
    return side | {"chunk_id": p.chunk_id, "lines": lines} if p.chunk_id else side


def date_note(side: dict, other: dict) -> str:
    """ ", dated 2025-03-01, newer" for a conflict's ``side`` (", newer" when it is later than the ``other``'s date),
    "" for a side without a date (logged before dates were kept)."""
    dated, against = side.get("dated", ""), other.get("dated", "")
    if not dated:
        return ""
    return f", dated {dated}" + (", newer" if against and dated > against else "")


def _quote_lines(p: Passage, quote: str) -> list[int]:
    """The source lines [first, last] ``quote`` (white space made single) spans in ``p``; the chunk's first when
    it cannot be found."""
    words = quote.split()
    found = re.search(r"\s+".join(map(re.escape, words)), p.text, re.I) if words else None
    if found is None:
        return [p.line_start, p.line_start]
    first = p.line_start + p.text.count("\n", 0, found.start())
    return [first, first + found.group(0).count("\n")]


def conflicts_by_rule(passages: list[Passage]) -> list[Conflict]:
    """Pairs of sources that give one quantity disjoint sets of values.

    A source may state a quantity several times (a table, operating modes); it
    conflicts with another source only when the two share no value at all.
    """
    stated: dict[tuple[str, str], dict[str, list[tuple[Passage, Statement]]]] = {}
    for passage in passages:
        for st in statements(passage.text):
            stated.setdefault((st.quantity, st.dimension), {}).setdefault(passage.source, []).append((passage, st))
    found: list[Conflict] = []
    for (quantity, _), by_source in stated.items():
        sources = list(by_source)
        for i, first in enumerate(sources):
            for second in sources[i + 1 :]:
                a, b = by_source[first], by_source[second]
                if not any(_same(sa.value, sb.value) for _, sa in a for _, sb in b):
                    found.append(
                        Conflict(quantity, _side(a[0][0], a[0][1].quote), _side(b[0][0], b[0][1].quote), "rule")
                    )
    return found


def _same(x: float, y: float) -> bool:
    return abs(x - y) <= 1e-9 * max(abs(x), abs(y), 1.0)


_LLM_LINE = re.compile(r'S(\d+)\s*\|\s*"([^"]+)"\s*\|\s*S(\d+)\s*\|\s*"([^"]+)"')


def conflicts_by_llm(passages: list[Passage], *, model: str) -> list[Conflict]:
    """Contradictions the model reports, kept only when both quotes occur verbatim."""
    if len({p.source for p in passages}) < 2:
        return []
    listing = "\n\n".join(f"[{p.label}] ({p.source} {p.where})\n{p.text}" for p in passages)
    reply = llm.complete(
        messages=[{"role": "user", "content": prompts.render("conflicts", passages=listing)}],
        purpose="conflicts",
        model=model,
        max_tokens=300,
    )
    by_label = {p.label: p for p in passages}
    found = []
    for m in _LLM_LINE.finditer(reply.text):
        pa, pb = by_label.get(f"S{m.group(1)}"), by_label.get(f"S{m.group(3)}")
        qa, qb = m.group(2).strip(), m.group(4).strip()
        if pa and pb and pa.source != pb.source and _occurs(qa, pa.text) and _occurs(qb, pb.text):
            found.append(Conflict("", _side(pa, qa), _side(pb, qb), "llm"))
    return found


def _occurs(quote: str, text: str) -> bool:
    return " ".join(quote.split()).lower() in " ".join(text.split()).lower()


def conflicts_detect(passages: list[Passage], *, model: str) -> list[Conflict]:
    """Rule-based conflicts, plus the LLM's when ``model`` is not ``none``."""
    found = conflicts_by_rule(passages)
    if model != "none":
        quoted = {(c.a["quote"], c.b["quote"]) for c in found}
        found += [c for c in conflicts_by_llm(passages, model=model) if (c.a["quote"], c.b["quote"]) not in quoted]
    return found


def conflicts_concerning(conflicts: list[dict], *, question: str, answer: str, cited: set[str]) -> list[dict]:
    """The conflicts (``Conflict.as_dict``) an answer should show: those about what was asked or answered.

    A conflict concerns the answer when the question or the answer names its quantity ("VCC"), or, for a
    conflict the LLM found (it names no quantity), when the answer cites a side's passage. Retrieved passages
    often state other values too: the datasheet chunk that gives the weight also gives the logic supply, and
    a warning about the logic supply beside the weight tells the reader nothing about the weight.
    """
    said = f"{question}\n{answer}"
    return [
        c
        for c in conflicts
        if (
            re.search(rf"(?<![\w-]){re.escape(c['quantity'])}(?![\w-])", said, re.I)
            if c["quantity"]
            else bool({c["a"]["label"], c["b"]["label"]} & cited)
        )
    ]
