"""What an earlier turn's answer quoted, read back from the answer as shown."""

from __future__ import annotations

import re

from core.units import Unit
from generation.reader.words import unit_key


# An earlier answer's marker ("[S2]" on the ask page, "[2]" in /v1/ content) and the start of /v1/'s source list.
_MARKER = re.compile(r"(?:^|\s+)\[S?\d+\](?=\s|$)\s*")
_SOURCES = re.compile(r"\n\s*Sources:\s*\n")
_BULLET = re.compile(r"^\s*(?:[-*+•]|\d+[.)])\s+")


def quoted_sentences(answer: str) -> tuple[str, ...]:
    """The sentences ``answer`` (an earlier turn's answer, as the ask page or ``/v1/`` showed it) quoted, in order:
    its text before each ``[S#]`` / ``[#]`` marker of a line (not a table's header row shown over a quoted row), before
    a "Sources:" list, less a list item's bullet; of 3 words or more."""
    quoted = [q for line in _SOURCES.split(answer, maxsplit=1)[0].splitlines() for q in _MARKER.split(line)[:-1]]
    return _sentences(quoted)


# A citation marker anywhere in a sentence an LLM wrote ("… eight sensors [S1].")
_CITED = re.compile(r"\s*\[S?\d+\]")


def stored_quotes(grounding: dict) -> tuple[str, ...]:
    """The sentences an earlier answer quoted, from its stored audit (``QueryLog.grounding``, ``Answer.grounding``):
    the extractive reader's quoted units, or the sentences an LLM wrote that the grounding check kept; as
    ``quoted_sentences`` gives them (a list item without its bullet, of 3 words or more)."""
    if "quoted" in grounding:
        texts = [q["text"] for q in grounding["quoted"]]
    else:
        texts = [s["text"] for s in grounding.get("sentences", []) if s.get("supported_by")]
    return _sentences([_CITED.sub("", text) for text in texts])


def _sentences(texts: list[str]) -> tuple[str, ...]:
    """``texts`` as quoted sentences: a list item without its bullet, white space joined, of 3 words or more, each
    once, in order."""
    cleaned = (" ".join(_BULLET.sub("", text).split()) for text in texts)
    return tuple(dict.fromkeys(q for q in cleaned if len(q.split()) >= 3))


def _said_before(unit: Unit, quoted: tuple[str, ...]) -> bool:
    """Whether ``unit`` is one of the sentences an earlier answer quoted (``quoted_sentences``: a list item without
    its bullet)."""
    return unit_key(_BULLET.sub("", unit.text)) in {unit_key(q) for q in quoted}
