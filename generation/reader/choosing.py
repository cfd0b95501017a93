"""Which of the scored units are quoted, and in what order."""

from __future__ import annotations

from core.units import (
    KEY_PARTS,
    field_parts,
    heads,
    list_across,
    numbered_run,
    paragraph_lead,
    passage_units,
)
from generation.reader.codes import _as_written
from generation.reader.followup import _said_before
from generation.reader.passages import Passage, Quote, Reading
from generation.reader.scoring import units_score
from generation.reader.words import (
    _DOTTED,
    _holds,
    _in_question_language,
    _numbers,
    _own_words,
    _values,
    current,
    stems,
    unit_key,
)


NEAR_BEST = 0.12  # a further unit is quoted only when it scores within this of the best one (calibrated)
# A unit further down, within this of the best, is quoted too when it holds a question word no unit quoted holds:
# "What happens when the buffer is full?" is best matched by the sentence naming the buffer, and answered by the
# next ("When the buffer is full, the oldest values are overwritten."). Measured: bench/followups.py,
# foundry eval answers (docs/decisions.md, D0024).
COVER_MARGIN = 0.25


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
    when the question asks a value (``Words.asks_value``: "what range can I set?" is answered by "(0 s to 600 s,
    default 0 s)", not by the sentence naming every setting) and no unit before them states one; at most
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
    if typed and quoted and current().asks_other.search(typed):
        fresh = [q for q in unquoted if not _said_before(q.unit, quoted)]
    if not fresh:
        return Reading([], 0.0, scored, sorted(near))
    best = fresh[0].score
    asked = _own_words(question, typed)
    chosen: list[Quote] = []
    covered: set[str] = set()  # the words of the units chosen
    # a value is asked, and no unit chosen states one
    value = current().asks_value.search(typed or question) is not None
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
    asks_version = not current().version_words.isdisjoint(asked)
    for quote in list(chosen):
        lead = _lead(quote, unquoted)
        if lead is None or any(_same(lead, c) or unit_key(lead.unit.text) == unit_key(c.unit.text) for c in chosen):
            continue
        heads = lead.unit.text == quote.unit.context  # the list's heading is the item's context: not its own words
        named = stems(lead.unit.text) | stems(quote.passage.under)
        own = stems(quote.unit.text if heads else quote.unit.scored_text)
        numbered = asks_version and bool(_DOTTED.search(lead.unit.text)) and not _DOTTED.search(quote.unit.text)
        if numbered or any(_holds(named, w) and not _holds(own, w) for w in asked):
            chosen.append(lead)
    order = {p.label: i for i, p in enumerate(passages)}
    for quote in list(chosen):
        steps = _procedure(quote, unquoted, passages)
        chosen += [step for step in steps if step not in chosen]
        joined = [step.passage for step in steps if step.passage.label != quote.passage.label]
        if joined:  # a procedure cut by a chunk boundary reads in source order, where its best part ranks
            first = min(order[p.label] for p in [quote.passage, *joined])
            order |= {p.label: first for p in [quote.passage, *joined]}
    chosen = _headed_once(chosen, order)
    return Reading(chosen, best, scored, sorted(near))


def _headed_once(chosen: list[Quote], order: dict[str, int]) -> list[Quote]:
    """``chosen`` in answer order (by ``order``, then source order), a list's heading that the chunker repeated above
    the rest of a procedure cut by a chunk boundary (``core.units.continued_head``) quoted where it first stands."""
    key = lambda q: (order[q.passage.label], q.passage.ordinal, q.unit.start)  # noqa: E731
    chosen = sorted(chosen, key=key)
    for k, quote in enumerate(chosen):
        first = next((c.passage for c in chosen[:k] if order[c.passage.label] == order[quote.passage.label]), None)
        if first is None or first.ordinal >= quote.passage.ordinal or quote.unit.kind != "sentence":
            continue
        unit = next((u for u in passage_units(first.text) if u.text == quote.unit.text), None)
        if unit is not None:
            chosen[k] = Quote(first, unit, quote.score, quote.cosine, quote.lexical)
    out: list[Quote] = []
    for quote in sorted(chosen, key=key):
        if not any(_same(quote, q) for q in out):
            out.append(quote)
    return out


def _procedure(quote: Quote, scored: list[Quote], passages: list[Passage]) -> list[Quote]:
    """The other steps of the numbered list ``quote`` is a step of (``numbered_run``), as quotes of ``scored``, with
    the source's own numbers; none when it is no numbered item. They are quoted with it, beyond ``max_units``: a
    step is read in its procedure. A list a chunk boundary cut is joined across it (``list_across``) where the
    passages read hold the chunk before or after of the same source."""
    units = passage_units(quote.passage.text)
    index = next((i for i, u in enumerate(units) if u.start == quote.unit.start), None)
    if index is None:
        return []
    own_run = numbered_run(units, index)
    steps = {(quote.passage.label, units[i].start) for i in own_run}
    beside = {(p.source, p.ordinal): p for p in passages}
    for way in (1, -1):
        passage, run, own = quote.passage, own_run, units
        while run and (other := beside.get((passage.source, passage.ordinal + way))) is not None:
            theirs = passage_units(other.text)
            before, after = list_across(own, theirs) if way == 1 else list_across(theirs, own)
            mine, next_run = (before, after) if way == 1 else (after, before)
            if not set(run) & set(mine):
                break
            steps |= {(other.label, theirs[i].start) for i in next_run}
            passage, run, own = other, next_run, theirs
    steps.discard((quote.passage.label, quote.unit.start))
    return [q for q in scored if (q.passage.label, q.unit.start) in steps]


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


def _same(a: Quote, b: Quote) -> bool:
    return a.passage.label == b.passage.label and a.unit.start == b.unit.start


def _lead(quote: Quote, scored: list[Quote]) -> Quote | None:
    """The label line opening ``quote``'s paragraph (``paragraph_lead``: ``Version 2.4.1 - released 2026-06-09``
    above ``Fixed: the BUS LED stayed amber …``), as a unit of ``scored``; or the heading of the list ``quote`` is an
    item of (``core.units.heads``; never scored of its own), quoted with the item's scores; None when there is none."""
    if quote.unit.kind == "item" and quote.unit.context:
        units = passage_units(quote.passage.text)
        above = [units[k] for k in heads(units) if units[k].start < quote.unit.start]
        if above and above[-1].text == quote.unit.context:
            return Quote(quote.passage, above[-1], quote.score, quote.cosine, quote.lexical)
    line = paragraph_lead(quote.passage.text, quote.unit)
    if line is None:
        return None
    return next(
        (q for q in scored if q.passage.label == quote.passage.label and q.unit.line_first == line == q.unit.line_last),
        None,
    )
