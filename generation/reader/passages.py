"""What the reader reads and what it gives: passages, the quotes of their units, and a reading."""

from __future__ import annotations

from dataclasses import dataclass, field

from core.units import (
    Unit,
    LineMap,
    maps_line_by_line,
    mapped_lines,
    table_rule,
)
from generation.reader.weights import Parts


@dataclass(frozen=True)
class Passage:
    """A passage as the reader needs it: its label, verbatim text and where it sits in its source."""

    label: str
    text: str
    line_start: int
    line_end: int
    page_start: int | None = None
    page_end: int | None = None
    rank: int = 1  # 1 = the best fused rank among the passages
    source: str = ""
    ordinal: int = 0  # the chunk's position in its source, for source order
    under: str = ""  # the document's title and the chunk's heading path (``Chunk.under``)
    line_map: LineMap | None = None  # the source lines of each line of ``text`` (``Chunk.line_map``)


@dataclass(frozen=True)
class Quote:
    passage: Passage
    unit: Unit
    score: float
    cosine: float
    lexical: float
    parts: Parts | None = None  # what was measured of the unit, which ``score`` weighs (``units_score``)

    @property
    def quoted(self) -> str:
        """The unit as quoted: its text verbatim, line breaks of the source made spaces."""
        return " ".join(self.unit.text.split())

    @property
    def lines(self) -> tuple[int, int]:
        """The unit's own lines in the source (a table row's own row, not its header's): by the passage's
        ``line_map``, else counted when its text maps line by line (``maps_line_by_line``), else the passage's whole
        span."""
        p = self.passage
        mapped = None
        if p.line_map and len(p.line_map) == p.text.count("\n") + 1:
            mapped = mapped_lines(p.line_map, self.unit.line_first, self.unit.line_last)
        if mapped is not None:
            return mapped
        if not maps_line_by_line(p.text, p.line_start, p.line_end, p.page_start, p.page_end):
            return p.line_start, p.line_end
        return p.line_start + self.unit.line_first, p.line_start + self.unit.line_last

    def as_dict(self) -> dict:
        first, last = self.lines
        return {
            "label": self.passage.label,
            "text": self.unit.text,
            "kind": self.unit.kind,
            "lines": [first, last],
            "score": round(self.score, 4),
            "cosine": round(self.cosine, 4),
            "lexical": round(self.lexical, 4),
        }


@dataclass
class Reading:
    quotes: list[Quote]  # chosen, in answer order
    best: float  # best unit score (0 when no unit)
    scored: list[Quote]  # every unit, best first (audit, calibration)
    followed: list[str] = field(default_factory=list)  # labels of the passages the earlier turn was answered from

    @property
    def text(self) -> str:
        """The answer: each quote verbatim, followed by its passage label; a line per passage, on which its
        sentences run on, a line per list item, so that an item stays an item, and a table's rows under its header
        row, so that their columns are named (Markdown: a list or a table stands a blank line apart from the text
        around it, or it is read as that text's lines)."""
        lines: list[str] = []
        previous = None
        for label in dict.fromkeys(q.passage.label for q in self.quotes):
            for q in (q for q in self.quotes if q.passage.label == label):
                kinds = {q.unit.kind} | ({previous.unit.kind} if previous else set())
                same_table = kinds == {"row"} and previous is not None and previous.unit.context == q.unit.context
                if previous is not None and (
                    ("row" in kinds and not same_table) or ("item" in kinds and len(kinds) > 1)
                ):
                    lines.append("")  # a table or a list starts or ends: a blank line apart from what stands before
                if q.unit.kind == "row" and q.unit.context and not same_table:
                    lines += [q.unit.context, table_rule(q.unit.context)]
                if previous is not None and previous.passage.label == label and not kinds & {"item", "row"}:
                    lines[-1] += f" {q.quoted} [{label}]"
                else:
                    lines.append(f"{q.quoted} [{label}]")
                previous = q
        return "\n".join(lines)

    def audit(self, limit: int = 10) -> dict:
        return {
            "reader": "extractive",
            "best": round(self.best, 4),
            "followed": self.followed,
            "quoted": [q.as_dict() for q in self.quotes],
            "top_units": [q.as_dict() for q in self.scored[:limit]],
        }
