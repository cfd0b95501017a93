"""An answer's source labels numbered S1…Sn in the order the asker reads them, with no gaps.

Retrieval labels its passages by rank (S1 the best found); an answer cites only some of them, so it read
"[S2] … [S3]" with no S1, and a follow-up, whose passages include those its earlier turn quoted, "S3, S10,
S11". The labels are renumbered by their first appearance in the answer text, then the citations', then those
only the conflicts or the passages found name. The audit record (``grounding["labels"]``) keeps which
retrieval label each one was.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from generation.answers.answer import Answer

MARKER = re.compile(r"\[(S\d+)\]")
# "Passages found: S1 manual.md, lines 4-15; S3 …" (``compose.passages_found``), in the refusal's language
# ("Gevonden passages: S1 …"): a label after the list's colon or a semicolon.
_LISTED = re.compile(r"(?:(?<=: )|(?<=; ))(S\d+)(?= )")


class Relabel:
    """Old label → new label, assigned on first sight; the same text always gets the same labels."""

    def __init__(self) -> None:
        self.labels: dict[str, str] = {}

    def label(self, old: str) -> str:
        if old not in self.labels:
            self.labels[old] = f"S{len(self.labels) + 1}"
        return self.labels[old]

    def text(self, text: str) -> str:
        """``text`` with its ``[S#]`` markers and its listed passages relabelled, in order of appearance."""
        spans = sorted(
            [(m.start(1), m.end(1)) for m in MARKER.finditer(text)] + [m.span(1) for m in _LISTED.finditer(text)]
        )
        out, at = [], 0
        for start, end in spans:
            out += [text[at:start], self.label(text[start:end])]
            at = end
        return "".join(out) + text[at:]


def streamed(send: Callable[[str], None] | None) -> tuple[Callable[[str], None] | None, Relabel]:
    """``send`` given each piece relabelled as it goes (pieces in order relabel as their whole does)."""
    relabel = Relabel()
    if send is None:
        return None, relabel
    return (lambda piece: send(relabel.text(piece))), relabel


def answer_relabel(answer: Answer) -> Answer:
    """``answer`` with its text, citations and conflicts labelled S1…Sn in reading order (see the module)."""
    relabel = Relabel()
    answer.answer = relabel.text(answer.answer)
    for citation in answer.citations:
        citation["id"] = relabel.label(citation["id"])
    for conflict in answer.conflicts:
        for side in _sides(conflict):
            if side.get("label"):
                side["label"] = relabel.label(side["label"])
    if relabel.labels and answer.grounding is not None:
        answer.grounding["labels"] = {new: old for old, new in relabel.labels.items()}
    return answer


def _sides(conflict: dict) -> list[dict]:
    sides = list(conflict.get("sides") or [])
    sides += [conflict[key] for key in ("a", "b") if isinstance(conflict.get(key), dict)]
    return sides
