"""The retrieval gate: the retriever, never the LLM, decides whether evidence exists."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from django.utils.translation import gettext_noop

# Marked for translation, kept in English: the answer translates them into the question's language
# where it is written (generation/answers/language.py).
NO_EVIDENCE_ANSWER = gettext_noop("No supporting documentation found in indexed sources.")
NO_EVIDENCE_HINT = gettext_noop(
    "Nothing relevant is indexed for this question; add documents that cover it and run foundry ingest."
)


@dataclass(frozen=True)
class GateDecision:
    passed: bool
    max_score: float
    passing: int
    min_score: float
    min_chunks: int
    reason: str

    def as_dict(self) -> dict:
        return asdict(self)


def gate_decide(scores: list[float], *, min_score: float, min_chunks: int) -> GateDecision:
    """Pass only when the best similarity reaches ``min_score`` and at least
    ``min_chunks`` chunks do."""
    best = max(scores, default=0.0)
    passing = sum(1 for s in scores if s >= min_score)
    if best < min_score:
        reason = f"best similarity {best:.2f} < min_score {min_score:.2f}"
    elif passing < min_chunks:
        reason = f"{passing} chunk(s) reach min_score {min_score:.2f}, min_chunks is {min_chunks}"
    else:
        reason = f"{passing} chunk(s) reach min_score {min_score:.2f}"
    return GateDecision(
        passed=best >= min_score and passing >= min_chunks,
        max_score=round(best, 4),
        passing=passing,
        min_score=min_score,
        min_chunks=min_chunks,
        reason=reason,
    )
