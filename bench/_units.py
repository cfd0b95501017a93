"""The units the reader scored for an answer, with what was measured of each, kept for bench/fit_scoring.py.

``record()`` wraps the reader's ``units_score`` where ``generation.reader.choosing`` calls it;
``asked(answer_question)`` wraps the function a benchmark asks with, so ``units(answer)`` gives the units of that
answer's last reading (None when nothing was read: the gate refused, or the answer came from the cache).
"""

from __future__ import annotations

from collections.abc import Callable

_calls: list[list] = []
_by_answer: dict[int, tuple[object, list | None]] = {}


def record() -> None:
    from generation.reader import choosing

    scored = choosing.units_score

    def recorded(*args, **kwargs):
        quotes = scored(*args, **kwargs)
        _calls.append(quotes)
        return quotes

    choosing.units_score = recorded


def asked(answer_question: Callable) -> Callable:
    def ask(**kwargs):
        before = len(_calls)
        answer = answer_question(**kwargs)
        read = _calls[before:]
        _by_answer[id(answer)] = (answer, read[-1] if read else None)  # the answer kept, so its id stays its own
        return answer

    return ask


def units(answer) -> list[dict] | None:
    """Each unit of ``answer``'s last reading: what was measured of it (``Parts``), its passage's rank and label, where
    it starts in the passage (the reader's order among equal scores) and its text."""
    _, quotes = _by_answer.get(id(answer), (None, None))
    return None if quotes is None else rows(quotes)


def rows(quotes: list) -> list[dict]:
    """``quotes`` (``units_score``'s) as ``units`` gives them."""
    return [
        {
            "parts": q.parts.as_dict(),
            "rank": q.passage.rank,
            "label": q.passage.label,
            "start": q.unit.start,
            "text": " ".join(q.unit.text.split()),
        }
        for q in quotes
    ]
