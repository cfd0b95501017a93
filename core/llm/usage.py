"""What model calls cost: the completion returned to callers, the calls counted by ``record_calls()``."""

from __future__ import annotations

import contextlib
import contextvars
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Completion:
    text: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    cost: float


@dataclass
class CallRecord:
    """What the model calls inside one ``record_calls()`` block cost."""

    completions: list[tuple[str, str]] = field(default_factory=list)  # (purpose, model)
    embedding_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0

    @property
    def llm_calls(self) -> int:
        return len(self.completions)


_recorder: contextvars.ContextVar[CallRecord | None] = contextvars.ContextVar("foundry_llm_calls", default=None)


@contextlib.contextmanager
def record_calls() -> Iterator[CallRecord]:
    """Count every completion and embedding call made inside the block."""
    record = CallRecord()
    token = _recorder.set(record)
    try:
        yield record
    finally:
        _recorder.reset(token)


def _cost(response: Any, model: str) -> float:
    if model.startswith("local/"):
        return 0.0
    from core.llm.provider import litellm

    try:
        return float(litellm.completion_cost(completion_response=response) or 0.0)
    except Exception:  # litellm raises for models missing from its price map; cost is then unknown
        logger.info("no price known for %s", model)
        return 0.0
