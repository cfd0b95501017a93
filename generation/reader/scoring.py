"""Every unit of the passages scored against the question."""

from __future__ import annotations

import re

from core import llm
from core.grounding import content_tokens
from core.units import (
    Unit,
    field_parts,
    heads,
    is_label,
    item_sentences,
    passage_units,
    stands_apart,
)
from generation.reader.codes import _defines, _lettered_code, _series
from generation.reader.followup import _said_before
from generation.reader.passages import Passage, Quote
from generation.reader.weights import Parts, weights_for
from generation.reader.words import (
    _asked_words,
    _counts,
    _holds,
    _in_question_language,
    _lasting,
    _meant_codes,
    _numbers,
    _own_words,
    current,
    stems,
    unit_key,
)


# Units are embedded in batches of this many (sorted by length, llm.embed): small batches pad less.
EMBED_BATCH = 16


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
    ``followed`` candidates): their units score the ``follow`` weight more (``weights``).
    ``quoted``: the sentences that turn's answer quoted (``quoted_sentences``): with ``typed`` they are read as the
    follow-up goes on from them (the ``continues`` weight).
    Each quote keeps what was measured of its unit (``Parts``), which its score weighs (``weights.weights_for``).
    """
    headings = {p.label: {unit_key(h) for h in p.under.split(" > ")} for p in passages}
    asked = _asked_words(question)
    told = asked | _numbers(question)
    read = current()
    counts = read.asks_count.search(question) is not None  # "How many sensors …?": a unit with no count cannot answer
    units = [
        (p, u)
        for p in passages
        for u in _readable_units(p.text)
        if _states_something(u)
        and unit_key(u.text) not in headings[p.label]  # "2.1 Power": names, says nothing
        and not _echoes(u, told)
        and (not counts or _counts(u.text))
    ]
    if not units:
        return []
    both = [question, typed] if typed and typed != question else [question]
    goes_on = [f"{' '.join(quoted)} {typed}"] if typed and quoted else []
    # an item reads as well as its best sentence, and as well alone as under its list's heading (``core.units.heads``)
    parts = [(k, s) for k, (_, u) in enumerate(units) for s in item_sentences(u) + _alone(u)]
    # What is asked is embedded as a query, what is read as passages (e5's "query: " / "passage: "; one for MiniLM).
    vectors = llm.embed(both + goes_on, model=embedding_model, batch_size=EMBED_BATCH, kind="query") + llm.embed(
        [u.scored_text for _, u in units] + [s for _, s in parts], model=embedding_model, batch_size=EMBED_BATCH
    )
    asked_vectors, start = vectors[: len(both)], len(both) + len(goes_on)
    unit_vectors = vectors[start : start + len(units)]
    own = _own_words(question, typed)
    carried = asked - own
    w = weights_for(embedding_model)
    on = [vectors[len(both)] if goes_on and not _said_before(u, quoted) else None for _, u in units]

    def cosines(v: list[float], k: int) -> tuple[float, float | None]:
        after = on[k]
        return max(_dot(a, v) for a in asked_vectors), None if after is None else _dot(after, v)

    best = [cosines(v, k) for k, v in enumerate(unit_vectors)]
    for (k, _), v in zip(parts, vectors[start + len(units) :]):
        asked_cosine, after = cosines(v, k)
        was_asked, was_after = best[k]
        best[k] = max(was_asked, asked_cosine), None if after is None or was_after is None else max(was_after, after)
    around = {p.label: stems(p.under) for p in passages}
    meant = _meant_codes(question)
    instructs = read.asks_what_to_do.search(typed or question) is not None
    quotes = []
    for (passage, unit), (asked_cosine, after) in zip(units, best):
        held, under, carried_held = _overlap(
            own, carried, stems(unit.scored_text) | _lasting(unit.text), around[passage.label]
        )
        measured = Parts(
            asked=asked_cosine,
            after=after,
            held=held,
            under=under,
            own=len(own),
            carried=carried_held,
            follow=passage.label in near,
            defines=any(_defines(unit.text, code) for code in meant),
            instructs=instructs and _instructs(unit),
        )
        quotes.append(Quote(passage, unit, measured.score(w), measured.cosine(w), measured.lexical(w), measured))
    return sorted(quotes, key=lambda q: (-q.score, q.passage.rank, q.unit.start))


@_in_question_language
def coverage(question: str, passages: list[Passage]) -> tuple[int, int]:
    """How many content words (stems) ``question`` asks, and how many of them some passage holds in its text, its
    heading path or its title."""
    asked = _asked_words(question)
    held = set().union(*(stems(p.text) | stems(p.under) for p in passages))
    return len(asked), sum(_holds(held, w) for w in asked)


def _alone(unit: Unit) -> list[str]:
    """A list item read under its list's heading, as it reads without it: a sentence introducing a procedure says
    what it is for, and is no part of each step."""
    return [unit.text] if unit.kind == "item" and unit.context else []


def _readable_units(text: str) -> list[Unit]:
    """The units of a passage's ``text`` less those that name and say nothing: the headings of its lists
    (``core.units.heads``: read with each item below them, their context: "So formatieren Sie Text kursiv" above
    the steps that do it), and a label with no number standing as a paragraph of its own (``is_label``: a heading
    written as a paragraph, a link to another page under "Related topics"). A label opening a paragraph stays, read
    as its lead ("Version 2.4.1 - released 2026-06-09" above "Maintenance release. …")."""
    units = passage_units(text)
    lines = text.split("\n")
    headings = {units[k].start for k in heads(units)}

    def names_only(unit: Unit) -> bool:
        numbered = any(c.isdigit() for c in unit.text)
        return unit.kind == "sentence" and is_label(unit.text) and not numbered and stands_apart(lines, unit)

    return [u for u in units if u.start not in headings and not names_only(u)]


def _instructs(unit: Unit) -> bool:
    """Whether ``unit``, or a sentence of it (a list item's), is an instruction (``Words.instruction``): it opens with
    a verb (a word that is no article, pronoun, preposition or auxiliary, ``Words.not_verbs``) and what it acts on
    ("Restore the configuration …")."""
    read = current()
    return any(
        (m := read.instruction.match(text)) is not None and m["verb"].lower() not in read.not_verbs
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


def _overlap(
    own: set[str], carried: set[str], held_by_unit: set[str], around: set[str]
) -> tuple[int, int, bool | None]:
    """How many of the question's own words the unit holds, how many more only its heading path or title holds,
    and, when words were carried over from earlier turns, whether it holds one, unless the unit names another code
    of the series of one of them (``_series``): a unit about E06 says "error", and is no answer about E05; the PX-100
    named in its title is no other RS-232 (``Parts.lexical`` weighs them). A measure asked by its adjective or verb
    is held by its noun (``Words.named_by``)."""
    held = {w for w in own if _holds(held_by_unit, w)}
    under = len({w for w in own - held if _holds(around, w)})
    if not carried:
        return len(held), under, None
    read = held_by_unit | around
    codes = {w for w in carried if _lettered_code(w)}
    other = any(_lettered_code(w) and w not in codes and _series(w) in {_series(c) for c in codes} for w in read)
    return len(held), under, bool(carried & read) and not other


def _dot(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b))
