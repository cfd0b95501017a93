"""The extractive reader: answers by quoting the passages' best units verbatim, with no LLM.

The passages that passed the retrieval gate are split into units (``core.units``):
sentences, list items and table rows. Each unit is scored against the question with the
embedding model already loaded (cosine of question and unit; a list item of several sentences by
its best sentence if that is closer), plus the share of the
question's content words (their stems) the unit holds, or its passage's heading path and document
title hold (a neighbour's words, the passage's fused rank and the share of the unit's words the
question lacks were measured too, and did not help: bench/reader_calibration.py). A code or name of
the question that no passage mentions (``unmentioned``) means the passages cannot answer it. The best
unit and up to ``reader_max_units - 1`` more that score nearly as well, or hold a question word the
units before them lack, or state the value a question asks ("what range …?", "the max?") when none before them
does, are quoted, grouped per passage in source order, each with its ``[S#]``; so is the
label line a quoted unit's paragraph opens with, when it (or the title and headings over it) names a question
word the unit lacks.

Whether the reading answers at all (the in-corpus "unanswerable" case the chunk gate cannot see) is
the answerability model's to judge (``generation.answerability``), from features of the reading. The
reader works on plain passage data, so the same code runs next to the database and on a compute worker.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import lru_cache, wraps
from itertools import takewhile
from typing import Any, TypeVar

from core import language, llm
from core.grounding import content_tokens
from core.text import code_shape, is_code_or_name
from core.units import (
    KEY_PARTS,
    Unit,
    field_parts,
    item_sentences,
    LineMap,
    maps_line_by_line,
    mapped_lines,
    numbered_run,
    paragraph_lead,
    passage_units,
    table_rule,
)

# Weight of the question's words in the unit score, fitted on SQuAD 2.0 dev (bench/reader_calibration.py,
# docs/decisions.md, D0024): they tell the sentence that names the asked-for thing
# apart from its neighbours, which embed alike.
LEXICAL_WEIGHT = 0.5
# A question word the unit lacks but its passage's heading path or document title holds counts this much of
# a word held: the unit is read, and cited, under them (the "PX-100" of a question stands in the title of the
# PX-100's manual, not in each of its sentences). Measured: bench/followups.py, bench/reader_calibration.py
# (docs/decisions.md, D0024).
UNDER_WEIGHT = 1.0
# Units are embedded in batches of this many (sorted by length, llm.embed): small batches pad less.
EMBED_BATCH = 16
_HOW_QUANTITY = re.compile(r"\bhow\s+(?:much|many|often)\b", re.IGNORECASE)  # asks a number, names no word
_WHAT_ABOUT = re.compile(r"\b(what|how)\s+about\b", re.IGNORECASE)  # "what about its weight?" asks of the weight
# "What does E03 mean?", "what is meant by MTBF": the verb asks what a code or name is, which its answer states
_MEANS = re.compile(r"\b((?:does|do|did)\b[^?]*?)\bmean\b|\bmeant\b", re.IGNORECASE)
# A version or a decimal ("2.4.1", "10.8"): a word of its own, where a plain number is not (``stems``)
_DOTTED = re.compile(r"(?<![\w.])\d+(?:\.\d+)+(?!\.?\w)")
_NUMBER = re.compile(r"(?<![\w.-])\d[\d.,]*(?![\w-])")
# "How many sensors …?" is answered by a count: a unit with no number of its own (the "232" of "RS-232" and the
# "2" of "X2" are names) cannot answer it, however close its words ("RS-232 sensor bus (X2: A, B, COM, SH)").
_HOW_MANY = re.compile(r"\bhow\s+many\b", re.IGNORECASE)
_COUNT_WORDS = frozenset(
    """one two three four five six seven eight nine ten eleven twelve fifteen twenty thirty forty fifty hundred
    thousand million billion dozen dozens single both none""".split()
)
_DURATION = re.compile(
    r"\d\s*(?:ms|s|sec|seconds?|min|minutes?|h|hours?|days?|weeks?|months?|years?|mm|cm|m|km)\b", re.IGNORECASE
)
# A question asking a limit, range, size, capacity or setting is answered by a value: "what range can I set?" is
# answered by "(0 s to 600 s, default 0 s)", not by the sentence naming every setting, however close its words; "what
# can it switch?" by "30 V DC / 1 A", not by "Active alarms switch the alarm relay".
_ASKS_VALUE = re.compile(
    r"\b(?:max(?:imum)?|min(?:imum)?|limits?|range|longest|shortest|highest|lowest|upper|lower|rat(?:ing|ed)|size"
    r"|how\s+(?:long|much|many|far|big|heavy|fast|often|high|low|wide|deep)"
    r"|(?:what|which)\s+(?:ip|ports?|address(?:es)?|voltages?|currents?|temperatures?|values?|speeds?|baud\s*rates?)"
    r"|what\s+(?:can|could|will|may)\s+(?:it|they|that|this|the\s+\w+)\s+(?:switch|carry|handle|drive|withstand|deliver))\b",
    re.IGNORECASE,
)
# "and the other switch?", "what else is printed on it?": a follow-up asking for another than the answer before it gave
_ASKS_OTHER = re.compile(r"\b(?:else|other|another)\b", re.IGNORECASE)
# A code written with hyphens ("PX-100", "RS-232", "KX-PX100-01"), and one typed without ("px100"): letters and digits
_HYPHENED = re.compile(r"(?<![\w-])(?=[\w-]*[A-Za-z])(?=[\w-]*\d)\w+(?:-\w+)+(?![\w-])")
_BARE_CODE = re.compile(r"(?<![\w-])(?=\w*[A-Za-z])(?=\w*\d)\w+(?![\w-])")
_VERSIONS = re.compile(r"\d+(?:\.\d+)*\.[xX]")
_VERSION_WORDS = frozenset({"version", "firmwar", "releas"})  # stems of the words asking which version
_CODE = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9.\-]*[A-Za-z0-9])?")
NEAR_BEST = 0.12  # a further unit is quoted only when it scores within this of the best one (calibrated)
# A unit further down, within this of the best, is quoted too when it holds a question word no unit quoted holds:
# "What happens when the buffer is full?" is best matched by the sentence naming the buffer, and answered by the
# next ("When the buffer is full, the oldest values are overwritten."). Measured: bench/followups.py,
# foundry eval answers (docs/decisions.md, D0024).
COVER_MARGIN = 0.25
# A follow-up goes on from the answer before it: "and once that's full?" asks of the buffer that answer named. A unit's
# cosine is also taken with that answer's quotes followed by the message, less this (the quotes are not what is asked),
# for every unit but those quotes. Measured: bench/followups.py (docs/decisions.md, D0024).
CONTINUES_DISCOUNT = 0.1
# A follow-up is read where the turn it follows was answered: a unit of a passage that holds a sentence that
# answer quoted scores this much more ("How do I fix it?" after "What does E03 mean?" quotes the remedy listed
# under E03). Measured: bench/followups.py (docs/decisions.md, D0024).
FOLLOW_BONUS = 0.1
# "What does E04 mean?" is answered where E04 is defined: a unit that opens with the code and a dash, colon or
# "means" ("**E04 – Network error.** …") scores this much more than one that only names it ("Fixed: E04 was
# reported falsely …"). Measured: bench/followups.py, foundry eval answers (docs/decisions.md, D0024).
DEFINES_BONUS = 0.25
# "How do I fix it?", "what should I do?" ask what to do, which an instruction says ("Check the power supply and the
# cable cross-section."): such a unit scores this much more than one that only shares the question's words ("Fixed:
# E04 was reported falsely …"). Measured: bench/followups.py, foundry eval answers (docs/decisions.md).
INSTRUCTS_BONUS = 0.25
_ASKS_WHAT_TO_DO = re.compile(
    r"\bhow\s+(?:do|can|should|must|would|could)\s+(?:i|we|you)\b|\bhow\s+to\b"
    r"|\bwhat\s+(?:do|should|must|can|shall)\s+(?:i|we)\s+do\b",
    re.IGNORECASE,
)
# An instruction opens with its verb, then what the verb acts on: "Check the …", "Give every …", "Do not use it …".
_INSTRUCTION = re.compile(
    r"^[\s*_`>#|-]*(?:\d+[.)]\s+)?(?:(?:do\s+not|don't|never|always|first|then)\s+)?(?P<verb>[A-Za-z]+)\s+"
    r"(?:the|a|an|every|each|all|any|no|whether|that|this|these|those|it|them|its|your|sure|again|off|up|out)\b",
    re.IGNORECASE,
)
_NO_VERB = frozenset(
    """a an the this that these those it its there here all both each every some any many most such only no
    in on at by for from with under over after before during when if while as to of into within without through
    between since until once above below behind near per via and or but so is are was were be do does did can could
    will would shall should must may might has have had not also then first next now finally""".split()
)
_DEFINITION = r"^[\s*_`#>|-]*{code}[\s*_`|]*(?:[–—:=|-]|\s+(?:means|stands\s+for)\b)"
# An earlier answer's marker ("[S2]" on the ask page, "[2]" in /v1/ content) and the start of /v1/'s source list.
_MARKER = re.compile(r"(?:^|\s+)\[S?\d+\](?=\s|$)\s*")
_SOURCES = re.compile(r"\n\s*Sources:\s*\n")
_BULLET = re.compile(r"^\s*(?:[-*+•]|\d+[.)])\s+")


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


# The language a question is read in: the question's and the passages' words are stemmed, and their stop words
# dropped, with that language's analyzer, so both sides of every comparison are read alike.
_READING: ContextVar[str] = ContextVar("reading_language", default=language.DEFAULT)
_F = TypeVar("_F", bound=Callable[..., Any])


@contextmanager
def reading(question: str) -> Iterator[str]:
    """Read in the language of ``question`` (``language.detect``) while the block runs."""
    token = _READING.set(language.detect(question))
    try:
        yield _READING.get()
    finally:
        _READING.reset(token)


def _in_question_language(function: _F) -> _F:
    @wraps(function)
    def wrapper(question: str, *args: Any, **kwargs: Any) -> Any:
        with reading(question):
            return function(question, *args, **kwargs)

    return wrapper  # type: ignore[return-value]


@_in_question_language
def units_score(
    question: str,
    passages: list[Passage],
    *,
    embedding_model: str,
    typed: str = "",
    near: frozenset[str] = frozenset(),
    quoted: tuple[str, ...] = (),
) -> list[Quote]:
    """Every unit of ``passages`` with its score against ``question``, best first (ties: passage rank, position).

    ``typed``: the follow-up as the asker typed it, when ``question`` is the standalone question made of it. The
    words ``question`` adds (carried over from earlier turns) name the topic, which the unit answering seldom
    repeats: together they count as one word, held when the unit or its heading path and title hold any; and a
    unit's cosine is the better of its cosines with ``question`` and with ``typed``.
    ``near``: the labels of the passages that hold a sentence the turn the follow-up came from quoted (retrieval's
    ``followed`` candidates): their units score ``FOLLOW_BONUS`` more.
    ``quoted``: the sentences that turn's answer quoted (``quoted_sentences``): with ``typed`` they are read as the
    follow-up goes on from them (``CONTINUES_DISCOUNT``).
    """
    headings = {p.label: {unit_key(h) for h in p.under.split(" > ")} for p in passages}
    asked = _asked_words(question)
    told = asked | _numbers(question)
    counts = _HOW_MANY.search(question) is not None
    units = [
        (p, u)
        for p in passages
        for u in passage_units(p.text)
        if _states_something(u)
        and unit_key(u.text) not in headings[p.label]  # "2.1 Power": names, says nothing
        and not _echoes(u, told)
        and (not counts or _counts(u.text))
    ]
    if not units:
        return []
    both = [question, typed] if typed and typed != question else [question]
    goes_on = [f"{' '.join(quoted)} {typed}"] if typed and quoted else []
    parts = [(k, s) for k, (_, u) in enumerate(units) for s in item_sentences(u)]
    # What is asked is embedded as a query, what is read as passages (e5's "query: " / "passage: "; one for MiniLM).
    vectors = llm.embed(both + goes_on, model=embedding_model, batch_size=EMBED_BATCH, kind="query") + llm.embed(
        [u.scored_text for _, u in units] + [s for _, s in parts], model=embedding_model, batch_size=EMBED_BATCH
    )
    asked_vectors, start = vectors[: len(both)], len(both) + len(goes_on)
    unit_vectors = vectors[start : start + len(units)]
    own = _own_words(question, typed)
    carried = asked - own
    on = [vectors[len(both)] if goes_on and not _said_before(u, quoted) else None for _, u in units]

    def cosine(k: int, v: list[float]) -> float:
        asked_cosine, after = max(_dot(a, v) for a in asked_vectors), on[k]
        return asked_cosine if after is None else max(asked_cosine, _dot(after, v) - CONTINUES_DISCOUNT)

    cosines = [cosine(k, v) for k, v in enumerate(unit_vectors)]
    for (k, _), v in zip(parts, vectors[start + len(units) :]):  # an item reads as well as its best sentence
        cosines[k] = max(cosines[k], cosine(k, v))
    around = {p.label: stems(p.under) for p in passages}
    lexical = [_overlap(own, carried, stems(u.scored_text) | _lasting(u.text), around[p.label]) for p, u in units]
    meant = _meant_codes(question)
    instructs = _ASKS_WHAT_TO_DO.search(typed or question) is not None
    quotes = [
        Quote(
            passage,
            unit,
            cosine
            + LEXICAL_WEIGHT * lex
            + FOLLOW_BONUS * (passage.label in near)
            + DEFINES_BONUS * any(_defines(unit.text, code) for code in meant)
            + INSTRUCTS_BONUS * (instructs and _instructs(unit)),
            cosine,
            lex,
        )
        for (passage, unit), cosine, lex in zip(units, cosines, lexical)
    ]
    return sorted(quotes, key=lambda q: (-q.score, q.passage.rank, q.unit.start))


@_in_question_language
def coverage(question: str, passages: list[Passage]) -> tuple[int, int]:
    """How many content words (stems) ``question`` asks, and how many of them some passage holds in its text, its
    heading path or its title."""
    asked = _asked_words(question)
    held = set().union(*(stems(p.text) | stems(p.under) for p in passages))
    return len(asked), sum(_holds(held, w) for w in asked)


@_in_question_language
def read(
    question: str,
    passages: list[Passage],
    *,
    embedding_model: str,
    max_units: int,
    exclude: set[str] | None = None,
    margin: float = NEAR_BEST,
    typed: str = "",
    near: frozenset[str] = frozenset(),
    quoted: tuple[str, ...] = (),
) -> Reading:
    """The best units to quote for ``question`` (see the module docstring): the best one, those within ``margin``
    of it, and those within ``COVER_MARGIN`` that hold a question word no unit before them holds, or state a number
    when the question asks a value (``_ASKS_VALUE``) and no unit before them states one; at most
    ``max_units``, best first; a labelled value among them is quoted as the sentence that states it, when one scores
    near (``_in_words``). Above each, the label line opening its paragraph (``_lead``) when that, or the
    title and headings it stands under, names a question word the unit lacks: "Which version fixed …?" and
    "Which firmware fixed …?" (in "Firmware Release Notes") are answered by "Fixed: …" under "Version 2.4.1 - …".

    A code ``question`` or ``typed`` types without hyphens is read as the passages write it (``_as_written``).
    ``exclude``: unit texts already quoted elsewhere (a document's earlier sections), never quoted again.
    ``typed``, ``near``, ``quoted``: as in ``units_score``; ``near`` counts only for a follow-up (``typed``). A
    follow-up asking for another ("and the other switch?", "what else …?") never quotes ``quoted`` again, though
    a label line over its quote may be.
    """
    near = near if typed else frozenset()
    question, typed = _as_written([question, typed], passages)
    scored = units_score(question, passages, embedding_model=embedding_model, typed=typed, near=near, quoted=quoted)
    unquoted = [q for q in scored if not exclude or unit_key(q.unit.text) not in exclude]
    fresh = unquoted
    if typed and quoted and _ASKS_OTHER.search(typed):
        fresh = [q for q in unquoted if not _said_before(q.unit, quoted)]
    if not fresh:
        return Reading([], 0.0, scored, sorted(near))
    best = fresh[0].score
    asked = _own_words(question, typed)
    chosen: list[Quote] = []
    covered: set[str] = set()  # the words of the units chosen
    value = _ASKS_VALUE.search(typed or question) is not None  # a value is asked, and no unit chosen states one
    for quote in fresh:
        if len(chosen) >= max_units or quote.score < best - max(margin, COVER_MARGIN):
            break
        held = stems(quote.unit.scored_text)
        states = bool(_numbers(quote.unit.text))
        adds = (
            quote.score >= best - margin
            or any(_holds(held, w) and not _holds(covered, w) for w in asked)
            or (value and states)
        )
        if adds and all(unit_key(quote.unit.text) != unit_key(c.unit.text) for c in chosen):
            chosen.append(quote)
            covered |= held
            value = value and not states
    in_words: list[Quote] = []
    for quote in chosen:
        if (quote := _in_words(quote, fresh, chosen)) not in in_words:
            in_words.append(quote)
    chosen = in_words
    # a version asked for is told by its number: "previous version" names none, "Version 2.2.0 - …" does
    asks_version = not _VERSION_WORDS.isdisjoint(asked)
    for quote in list(chosen):
        lead = _lead(quote, unquoted)
        if lead is None or lead in chosen:
            continue
        named, own = stems(lead.unit.text) | stems(quote.passage.under), stems(quote.unit.scored_text)
        numbered = asks_version and bool(_DOTTED.search(lead.unit.text)) and not _DOTTED.search(quote.unit.text)
        if numbered or any(_holds(named, w) and not _holds(own, w) for w in asked):
            chosen.append(lead)
    for quote in list(chosen):
        chosen += [step for step in _procedure(quote, unquoted) if step not in chosen]
    order = {p.label: i for i, p in enumerate(passages)}
    chosen.sort(key=lambda q: (order[q.passage.label], q.unit.start))
    return Reading(chosen, best, scored, sorted(near))


def _procedure(quote: Quote, scored: list[Quote]) -> list[Quote]:
    """The other steps of the numbered list ``quote`` is a step of (``numbered_run``), as quotes of ``scored``, with
    the source's own numbers; none when it is no numbered item. They are quoted with it, beyond ``max_units``: a
    step is read in its procedure."""
    units = passage_units(quote.passage.text)
    index = next((i for i, u in enumerate(units) if u.start == quote.unit.start), None)
    if index is None:
        return []
    starts = {units[i].start for i in numbered_run(units, index)} - {quote.unit.start}
    return [q for q in scored if q.passage.label == quote.passage.label and q.unit.start in starts]


def _in_words(quote: Quote, scored: list[Quote], chosen: list[Quote]) -> Quote:
    """``quote``, or when it is a labelled value (``max_bus_length_m_at_9600_baud: 1000``) the sentence, list item
    or table row of ``scored`` within ``COVER_MARGIN`` of it, not chosen yet, that states its value's numbers and
    names a word of its key ("The maximum bus length is 1,000 m at 9600 baud."): the same value, as people write it."""
    key, value = field_parts(quote.unit.text)
    numbers = _values(value)
    if quote.unit.kind != "field" or not numbers:
        return quote
    named = {w for w in stems(" ".join(KEY_PARTS.split(key))) if not w.isdigit()}
    return next(
        (
            q
            for q in scored
            if q.unit.kind != "field"
            and q.score >= quote.score - COVER_MARGIN
            and numbers <= _values(q.unit.text)
            and named & stems(q.unit.scored_text)
            and all(unit_key(q.unit.text) != unit_key(c.unit.text) for c in chosen)
        ),
        quote,
    )


def _values(text: str) -> set[str]:
    """``_numbers`` of ``text``, thousands separators aside ("1,000" is "1000")."""
    return {n.replace(",", "") for n in _numbers(text)}


def _as_written(texts: list[str], passages: list[Passage]) -> list[str]:
    """``texts`` with each code of four or more characters they type without hyphens spelt as the passages write it:
    "px100" is "PX-100", "rs232" "RS-232"; words are matched as written."""
    written = {_plain(m): m for p in passages for m in _HYPHENED.findall(p.text)}
    if not written:
        return texts

    def spelt(m: re.Match) -> str:  # a short one may be another code ("s12" need not be "S1-2")
        return written.get(_plain(m[0]), m[0]) if len(m[0]) > 3 else m[0]

    return [_BARE_CODE.sub(spelt, text) for text in texts]


def _lead(quote: Quote, scored: list[Quote]) -> Quote | None:
    """The label line opening ``quote``'s paragraph (``paragraph_lead``: ``Version 2.4.1 - released 2026-06-09``
    above ``Fixed: the BUS LED stayed amber …``), as a unit of ``scored``; None when there is none."""
    line = paragraph_lead(quote.passage.text, quote.unit)
    if line is None:
        return None
    return next(
        (q for q in scored if q.passage.label == quote.passage.label and q.unit.line_first == line == q.unit.line_last),
        None,
    )


def quoted_sentences(answer: str) -> tuple[str, ...]:
    """The sentences ``answer`` (an earlier turn's answer, as the ask page or ``/v1/`` showed it) quoted, in order:
    its text before each ``[S#]`` / ``[#]`` marker of a line (not a table's header row shown over a quoted row), before
    a "Sources:" list, less a list item's bullet; of 3 words or more."""
    quoted = [q for line in _SOURCES.split(answer, maxsplit=1)[0].splitlines() for q in _MARKER.split(line)[:-1]]
    return tuple(dict.fromkeys(" ".join(_BULLET.sub("", q).split()) for q in quoted if len(q.split()) >= 3))


def _said_before(unit: Unit, quoted: tuple[str, ...]) -> bool:
    """Whether ``unit`` is one of the sentences an earlier answer quoted (``quoted_sentences``: a list item without
    its bullet)."""
    return unit_key(_BULLET.sub("", unit.text)) in {unit_key(q) for q in quoted}


def unmentioned(question: str, passages: list[Passage]) -> list[str]:
    """The codes and names of ``question`` ("MTBF", "QoS", "E07") that no passage mentions, in its text or
    under its heading path and title: passages that never name what is asked about cannot answer it. Case,
    hyphens and dots aside ("PX100" is "PX-100")."""
    read = _plain(" ".join(f"{p.under} {p.text}" for p in passages))
    cores = {code: _code_core(code) for code in _CODE.findall(question)}
    return [code for code, core in cores.items() if _is_code(core) and _plain(core) not in read]


def _code_core(code: str) -> str:
    """A code without the ordinary words a compound joins to it with hyphens, as Dutch and German write them
    ("M12-stekker", "USB-Anschluss": "M12", "USB"); a word is ordinary when it is in lower case, or capitalised
    only at its start."""
    parts = code.split("-")
    while len(parts) > 1 and _ordinary(parts[-1]):
        parts.pop()
    while len(parts) > 1 and _ordinary(parts[0]):
        parts.pop(0)
    return "-".join(parts)


def _ordinary(part: str) -> bool:
    return len(part) > 1 and part.isalpha() and part[1:].islower()


def versions(question: str) -> set[str]:
    """The versions and decimals ``question`` names ("2.4.1", "10.8")."""
    return set(_DOTTED.findall(question))


def version_order(versions: set[str], under: str, text: str) -> int:
    """Where a passage is read for a question naming ``versions``: 0 when it opens with them (its heading path or
    first line names each: "Version 2.4.1 - released …"), 1 when it names them further on ("fixed in 2.4.1"), 2 when
    not; 0 for a question naming none."""
    if not versions:
        return 0
    first = next((line for line in text.splitlines() if line.strip()), "")
    if versions <= set(_DOTTED.findall(f"{under}\n{first}")):
        return 0
    return 1 if versions <= set(_DOTTED.findall(text)) else 2


def _is_code(token: str) -> bool:
    """A code or a name with a letter ("E03", "PX-100", "MTBF", "QoS"). A number is neither: a question may ask
    about a value or a version the sources give in other terms ("2.1.3" is "older than 2.2.0"), nor is a series of
    versions ("2.1.x")."""
    return any(ch.isalpha() for ch in token) and is_code_or_name(token) and not _VERSIONS.fullmatch(token)


def _plain(text: str) -> str:
    return re.sub(r"[-.]", "", text.casefold())


def unit_key(text: str) -> str:
    """How two quotes are told apart: case and white space aside."""
    return " ".join(text.lower().split())


def stems(text: str) -> set[str]:
    """The stems of ``text``'s content words (Snowball, in the language being read, ``reading``): "weighs" meets
    "weigh", "stored" "store"; and its
    versions and decimals ("2.4.1", "10.8"), which name what a question asks about as a code does: "When was 2.4.1
    released?" is answered by "Version 2.4.1 - released …", not by "Version 2.4.0 - released …"."""
    code = _READING.get()
    return {_stem(word, code) for word in content_tokens(text, code)} | set(_DOTTED.findall(text))


@lru_cache(maxsize=1 << 16)
def _stem(word: str, code: str = language.DEFAULT) -> str:
    return language.analyzer(code).stem(word)


# A measure asked by its adjective or verb is stated by its noun ("how heavy", "weighs" by "Weight 210 g"), a
# limit by its abbreviation or in full ("maximum" by ``max_bus_length_m``, "max" by "maximum"), a range by its
# limits ("storage temperature range" by ``storage_temperature_c.min: -40``), what a thing is made of by its
# material ("Housing material Polycarbonate").
_NAMED_BY = {
    _stem(word): {_stem(noun) for noun in nouns.split()}
    for words, nouns in (
        ("weigh heavy", "weight"),
        ("weight", "weigh"),
        ("long", "length"),
        ("wide", "width"),
        ("high tall", "height"),
        ("deep", "depth"),
        ("big large", "size"),
        ("fast", "speed"),
        ("far", "distance"),
        ("maximum", "max"),
        ("max", "maximum"),
        ("minimum", "min"),
        ("min", "minimum"),
        ("range", "min max minimum maximum"),
        ("made", "material"),
    )
    for word in words.split()
}


# Words of chat that name nothing an answer would hold ("whats the longest one I can set it to, exactly?"): "one"
# stands for a thing named before. Measured: bench/followups.py, foundry eval answers (docs/decisions.md).
_LIGHT = frozenset(
    _stem(w)
    for w in (
        "whats one ones still just any anything really actually exactly also too ok okay "
        # a negation's contraction, typed with its apostrophe ("doesn't": "doesn") or without ("doesnt")
        "doesn doesnt dont didn didnt isn isnt aren arent wasn wasnt weren werent wont cant couldn couldnt shouldn "
        "shouldnt wouldn wouldnt haven havent hasn hasnt hadn hadnt thats theres hows wheres whos youre ive"
    ).split()
)


# A question asked inside a statement: "Our firewall guy needs to know which port that uses." asks "which port that
# uses"; what comes before the question word is context, as a statement before a question is.
_EMBEDDED = re.compile(
    r"^.*?\b(?:know|tell\s+(?:me|us)|wonder(?:ing)?|find\s+out|figure\s+out|ask(?:ing)?|sure)\s+"
    r"(?=(?:what|which|where|when|how|why|whether|if)\b)",
    re.IGNORECASE,
)


def _own_words(question: str, typed: str) -> set[str]:
    """The stems of the words the asker typed that the standalone ``question`` keeps; every word of ``question``
    when it is not a follow-up, or the follow-up has no word of its own ("what about it?"). Of a message of several
    sentences, only those that ask (end with "?"): what it states before or after ("We keep a few spares in a
    warehouse.", "our firewall blocks most stuff") is context, counted with the words carried from earlier turns; so
    is what comes before a question asked inside a sentence (``_EMBEDDED``: "… needs to know which port that uses")."""
    asked = _asked_words(question)
    if typed:
        sentences = [x for x in re.split(r"(?<=[.!?])\s+", typed) if x.strip()]
        asking = [x for x in sentences if x.rstrip().endswith("?")]
        if len(sentences) > 1 and asking:
            typed = " ".join(asking)
        typed = _EMBEDDED.sub(" ", typed)
    return (_asked_words(typed) & asked if typed else asked) or asked


def _asked_words(question: str) -> set[str]:
    """The stems of a question's content words, less the quantity its "how" asks ("how much", "how many", "how
    often"): the answer states a number, not the word ("How much does it weigh?" is answered by "weighs 210 g");
    less the "about" of "what about", which asks of what follows it; and less the "mean" of "what does … mean"
    ("meant") asked of a code or name: the answer says what it is ("**E03 – Supply voltage out of range.**");
    less words of chat (``_LIGHT``)."""
    words = stems(_MEANS.sub(_meaning_asked, _WHAT_ABOUT.sub(r"\1", _HOW_QUANTITY.sub("how", question))))
    return words - _LIGHT


def _meaning_asked(match: re.Match) -> str:
    """ "What does E03 mean?" without its "mean" when a code or name is what is meant ("What did the loss mean to
    France?" asks what followed from it, and keeps it)."""
    return (match.group(1) or "") if _meant(match) else match.group(0)


def _meant(match: re.Match) -> list[str]:
    """The codes and names a ``_MEANS`` match asks the meaning of: those before "mean", or the question's for
    "meant"."""
    return [token for token in _CODE.findall(match.group(1) or match.string) if _is_code(token)]


def _meant_codes(question: str) -> list[str]:
    """The codes whose meaning ``question`` asks ("What does E04 mean?", "what is meant by MTBF")."""
    return [code for match in _MEANS.finditer(question) for code in _meant(match)]


def _defines(text: str, code: str) -> bool:
    """Whether ``text`` opens with ``code`` and what it is: "**E04 – Network error.** …", "MTBF: mean time …"."""
    return re.match(_DEFINITION.format(code=re.escape(code)), text, re.IGNORECASE) is not None


def _instructs(unit: Unit) -> bool:
    """Whether ``unit``, or a sentence of it (a list item's), is an instruction: it opens with a verb (a word that is
    no article, pronoun, preposition or auxiliary) and what it acts on ("Restore the configuration …")."""
    return any(
        (m := _INSTRUCTION.match(text)) is not None and m["verb"].lower() not in _NO_VERB
        for text in [unit.text, *item_sentences(unit)]
    )


def _states_something(unit: Unit) -> bool:
    """A unit with a content word or a number, that is not a bare label introducing what follows
    (``Wiring rules:``, ``Key features:``): quoted alone, a label says nothing."""
    return (bool(content_tokens(unit.text)) or any(ch.isdigit() for ch in unit.text)) and not unit.text.endswith(":")


def _echoes(unit: Unit, asked: set[str]) -> bool:
    """Whether ``unit`` is a labelled value that tells nothing the question does not: its value holds only words
    and numbers of the question (``model: PX-100`` for "How much does the PX-100 cost?"). ``asked``: the
    question's stems and numbers. A sentence may repeat the question and still answer it where it stands
    ("Fixed: alarm hysteresis bug." under "Version 2.4.1")."""
    if unit.kind != "field":
        return False
    said = field_parts(unit.text)[1]
    words = stems(said) | _numbers(said)
    letters = re.findall(r"\b[A-Za-z]\b", said)  # "Class A": a letter is no stop word in a value
    return bool(words) and words <= asked and not letters


def _lasting(text: str) -> set[str]:
    """``{"long"}`` when ``text`` states a duration or a length ("within 60 s", "about 72 hours", "1,000 m"): it
    holds the "long" of "how long does it wait?"."""
    return {"long"} if _DURATION.search(text) else set()


def _counts(text: str) -> bool:
    """Whether ``text`` states a count: a number standing alone ("up to 8"), or in words ("eight", "both"; not the
    "two" of "two-wire")."""
    return bool(_numbers(text)) or not _COUNT_WORDS.isdisjoint(re.findall(r"(?<![\w-])[a-z]+(?![\w-])", text.lower()))


def _numbers(text: str) -> set[str]:
    """The numbers standing alone in ``text`` ("210", "2.4.1"; not the "200" of "PX-100")."""
    return {n.rstrip(".,") for n in _NUMBER.findall(text)}


def _overlap(own: set[str], carried: set[str], held_by_unit: set[str], around: set[str]) -> float:
    """The share of the question's words the unit holds, a word only its heading path or title holds counting
    ``UNDER_WEIGHT``; the carried-over words, when there are any, count as one word held if any is, unless the
    unit names another code of the series of one of them (``_series``): a unit about E06 says "error", and is no
    answer about E05; the PX-100 named in its title is no other RS-232. A measure asked by its adjective or verb is
    held by its noun (``_NAMED_BY``)."""
    held = {w for w in own if _holds(held_by_unit, w)}
    count = len(held) + UNDER_WEIGHT * len({w for w in own - held if _holds(around, w)})
    if not carried:
        return count / len(own) if own else 0.0
    read = held_by_unit | around
    codes = {w for w in carried if _lettered_code(w)}
    other = any(_lettered_code(w) and w not in codes and _series(w) in {_series(c) for c in codes} for w in read)
    return (count + (bool(carried & read) and not other)) / (len(own) + 1)


def _series(code: str) -> tuple[str, str]:
    """A code's series: its shape and the letters it opens with ("e05" and "e06": ("A9", "e"); "rs-485" and "ax-200"
    are of two)."""
    return code_shape(code), "".join(takewhile(str.isalpha, code))


def _holds(words: set[str], word: str) -> bool:
    return word in words or bool(_NAMED_BY.get(word, set()) & words)


def _lettered_code(word: str) -> bool:
    """A code of letters and digits ("e05", "x3", "ax-200"), a stem as ``stems`` gives it; not a version."""
    return any(ch.isdigit() for ch in word) and any(ch.isalpha() for ch in word)


def _dot(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b))
