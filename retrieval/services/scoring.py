"""LLM relevance scoring 0-10 (D0007), batched; unreadable output never drops a chunk silently."""

from __future__ import annotations

import re
from dataclasses import dataclass

from core import llm, prompts

BATCH = 5
_LINE = re.compile(r"\[?S?(\d+)\]?\s*[:=\-–]\s*(\d+(?:\.\d+)?)")


@dataclass(frozen=True)
class Relevance:
    score: float | None  # None: the scorer gave nothing readable for this chunk
    flag: str = ""


def parse_scores(text: str, count: int) -> dict[int, float]:
    """Read "S1: 7" style lines; ids outside 1..count and scores outside 0..10 are ignored."""
    found: dict[int, float] = {}
    for match in _LINE.finditer(text):
        index, value = int(match.group(1)), float(match.group(2))
        if 1 <= index <= count and 0 <= value <= 10 and index not in found:
            found[index] = value
    return found


def relevance_score(*, question: str, passages: list[str], model: str) -> list[Relevance]:
    """One score per passage, in order, from batched prompts to ``model``."""
    out: list[Relevance] = []
    for start in range(0, len(passages), BATCH):
        batch = passages[start : start + BATCH]
        listing = "\n\n".join(f"[S{i}]\n{text}" for i, text in enumerate(batch, start=1))
        prompt = prompts.render("relevance", question=question, passages=listing, count=len(batch))
        reply = llm.complete(
            messages=[{"role": "user", "content": prompt}], purpose="relevance", model=model, max_tokens=12 * len(batch)
        )
        scores = parse_scores(reply.text, len(batch))
        out.extend(
            Relevance(scores[i]) if i in scores else Relevance(None, "unscored") for i in range(1, len(batch) + 1)
        )
    return out
