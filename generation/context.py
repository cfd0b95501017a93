"""The context builder: labelled passages inside a <context> fence, within a token budget."""

from __future__ import annotations

import re
from dataclasses import dataclass

from core import llm
from retrieval.services.retrieve import Candidate

_FENCE = re.compile(r"<(/?)\s*context\b", re.IGNORECASE)


def fence_escape(text: str) -> str:
    """Document text can never open or close the <context> fence."""
    return _FENCE.sub(lambda m: f"&lt;{m.group(1)}context", text)


def passage_block(candidate: Candidate) -> str:
    chunk = candidate.chunk
    # The label line is document text too: headings and file names come from the source.
    return fence_escape(f"[{candidate.label}] {chunk.source.name}, {chunk.location}\n{chunk.text}")


@dataclass(frozen=True)
class BuiltContext:
    text: str
    included: list[Candidate]
    tokens: int
    dropped: int


def context_build(candidates: list[Candidate], *, model: str, budget: int) -> BuiltContext:
    """Passages in rank order until the next one would exceed ``budget`` tokens of ``model``."""
    blocks: list[str] = []
    included: list[Candidate] = []
    used = 0
    for candidate in candidates:
        block = passage_block(candidate)
        size = llm.count_tokens(block, model=model)
        if used + size > budget:
            break
        blocks.append(block)
        included.append(candidate)
        used += size
    return BuiltContext("\n\n".join(blocks), included, used, len(candidates) - len(included))


def chunk_budget(*, model: str, configured: int, reserved: int) -> int:
    """Tokens left for passages: the configured budget, capped by the model's window minus ``reserved``."""
    window = llm.context_window(model)
    return max(0, min(configured, window - reserved) if window else configured)
