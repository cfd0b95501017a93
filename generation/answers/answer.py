"""What an answer is: the ``Answer`` a question gets, the errors that stop one, and the question's cleaning."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.utils.translation import gettext_noop

from core.markup import markup_strip
from core.text import TextRejected, user_text

MAX_QUESTION_CHARS = 4000
# Marked for translation, kept in English: ``foundry query`` prints it in the question's language.
LOW_CONFIDENCE_PREFIX = gettext_noop("Answer (LOW CONFIDENCE — the sources match the question only loosely):")


class QueryError(ValueError):
    """The question itself is unusable (empty, too long)."""


class QueryFailed(Exception):
    """A model failed for good while answering; the failure is in the query log."""

    def __init__(self, message: str, *, run_id: str) -> None:
        super().__init__(message)
        self.run_id = run_id


@dataclass
class Answer:
    run_id: str
    question: str
    answer_class: str
    answer: str
    citations: list[dict] = field(default_factory=list)
    conflicts: list[dict] = field(default_factory=list)
    coverage: float | None = None
    refusal: str = ""  # gate | relevance | reader | grounding | model, when nothing was answered
    gate: dict = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    llm_calls: int = 0
    tokens: dict[str, int] = field(default_factory=dict)
    cost: float = 0.0
    model: str = ""
    mode: str = ""
    hyde_text: str = ""
    hint: str = ""
    cached: bool = False
    grounding: dict = field(default_factory=dict)  # audit only (QueryLog, artifacts): holds withheld text

    def as_dict(self) -> dict[str, Any]:
        """What the asker sees: every field but ``grounding``, whose model output may hold the
        unsupported sentences the check withheld."""
        return {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "grounding"}


def question_clean(question: str) -> str:
    """The question with HTML markup taken out (its words kept), NULs and runs of whitespace made single
    spaces; QueryError when unusable. The limit counts the question as sent, markup included."""
    try:
        user_text(question, what="question", max_chars=MAX_QUESTION_CHARS)
    except TextRejected as exc:
        raise QueryError(str(exc)) from None
    try:
        return user_text(markup_strip(question), what="question", max_chars=MAX_QUESTION_CHARS)
    except TextRejected:
        # The question as sent was usable, so only the markup's removal emptied it.
        raise QueryError("the question holds only markup (HTML tags), no words to search for") from None


Progress = Callable[[str], None]
# Told each verified piece of the answer as soon as it is verified: the pieces, joined, are the answer text.
Sentences = Callable[[str], None]


def answer_pieces(text: str) -> list[str]:
    """``text`` cut after each ``[S#]`` marker group, each piece keeping the white space before the next:
    the pieces join to ``text``."""
    pieces = re.split(r"(?<=\])(\s+)(?!\[)", text)
    out = [pieces[i] + (pieces[i + 1] if i + 1 < len(pieces) else "") for i in range(0, len(pieces), 2)]
    return [p for p in out if p]


def elapsed_ms(started: float) -> float:
    """Milliseconds since ``started`` (a ``time.perf_counter()`` reading), to 0.1 ms."""
    return round((time.perf_counter() - started) * 1000, 1)
