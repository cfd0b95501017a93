"""Turning a follow-up message into a standalone question, with no LLM (the offline default).

A conversation's later messages lean on earlier ones: "And its storage temperature?",
"How do I reset it?", "What about firmware 2.4?". Retrieval, the gate and grounding only ever
see one question, so a follow-up is rewritten before retrieval by a deterministic rule:

1. A message is a follow-up when it is short (at most ``SHORT_WORDS`` content words; not a whole question
   about a code it names, "What does E03 mean?", which names its subject as "When was 2.4.1 released?" does), starts
   with an elliptical lead ("and", "what about", "also" …), or holds a demonstrative ("that
   version", "those ports") or a third-person pronoun ("it", "its", "they", "them", "their" …) anywhere,
   unless the pronoun's antecedent is in the message itself: "that" after a noun or verb is a relative
   pronoun or a conjunction ("the version that fixed"; not with only a verb after it, "which port that uses", nor
   after a "+": "the gateway + that psu"), "it" in "what does it mean when …" announces
   the subject that follows, "it" in "what does the LED mean when it …" the subject before "mean", and a
   pronoun after a proper noun ("How did France manage its colonies?") refers to it. A message of at most
   ``WHOLE_WORDS`` content words that names nothing (no code, no name, no capitalised word after the first) is
   a follow-up too: "How long may the stubs be?", "what happens if no dhcp server answers" ask about what the
   conversation is about; "What wire size should be used for the power supply of the gateway?" says what it
   asks about. Anything else is taken as a new, standalone question (a
   topic switch) and passes through unchanged: a message that names its own subject carries nothing.
2. The antecedent is the earlier turn sharing the most content words with the message as typed (what
   a turn carried over is not its own), the latest one on a tie: a third question may go back to the
   first. A code counts as shared with any code of the same shape ("E06" with "E05"). With no
   shared word it is the previous turn. A turn named by its place is that turn: "how do I fix the
   second one?" after "What does E01 mean?", "And E02?" leans on the second.
3. The standalone question is the message followed by the subject terms of the antecedent (made
   standalone itself) that the message lacks
   (``subject_terms``: the words of its noun phrases, in their original spelling and order), e.g.
   "And the storage temperature? (PX-100)" after "What is the operating temperature range of the
   PX-100?". The verb of the thing asked about stays behind ("connected", "use" in "does the gateway use" or
   "does it use"; the asker's own is what they do, and is carried: "delay" in "Can I delay an alarm …?"), and so
   does the asked-for attribute of a named owner ("operating temperature range" of the PX-100; a phrase with a
   code names a thing, and stays: "terminal X4 of the PX-100"): a follow-up
   asks something else about the same thing, and the antecedent's attribute only pulls retrieval and
   the reader back to the first answer. A code in the message replaces the antecedent's codes of its
   shape: "And how do I fix E04?" after "What does error code E03 mean?" carries "error code", not "E03". A name
   ("RESET", "MQTT") is carried unless the message holds it spelt the same way: "factory reset" does
   not name the RESET button, and a new name need not replace one ("what about with TLS?" still asks
   about MQTT). The measure after "how" ("how long", "how heavy") or "how much" ("how much power"
   does the PX-100 consume: "what about its weight?" asks of the PX-100) and a turn's place ("the first
   one") ask; they are never carried. Nor is a plain word no source in the asker's collections holds
   ("boss", "remembers" in "Nobody on the team remembers …"): it finds no passage and is no topic of theirs, and
   the question shown tells nothing of the collections the asker cannot read. Codes and names are carried all the
   same: one that no passage mentions tells the reader that the passages cannot answer.
4. A message that only puts a code in place of the antecedent's one code of that shape asks the antecedent
   again: "And E04?" after "What does error code E03 mean?" is "What does error code E04 mean?", "and
   2.4.1?" after "When was firmware 2.3.0 released?" is "When was firmware 2.4.1 released?".

The word classes (leads, pronouns, demonstratives, auxiliaries, fillers …) are data, one file per language
(``generation/data/followups/<code>.json``, read by ``words``); the conversation is read in the language of the
message (``core.language.detect``, the earlier turns' language as the prior for a message too short to tell), and
stems are Snowball's in that language. Where every noun is capitalised (German) a capital letter tells no name, and
a question's subject terms are its nouns and codes.

Measured by bench/followups.py on the follow-up sets of tests/data/ (each tuned on or not, as its docstring
says), on topic switches (each set's standalone questions asked after another conversation's first turn) and
on consecutive SQuAD questions about one paragraph (docs/benchmarks.md, "Follow-up questions").

``retrieval.condense_model`` chooses who condenses (``question_standalone``): ``rule`` (this rule,
the default), an LLM with the ``condense`` prompt template, or ``none`` (follow-ups asked as typed).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache, partial
from typing import TypeVar

from django.conf import settings

from core import language, llm, prompts
from core.config import CONDENSE_RULE
from core.text import is_code_or_name
from generation.condense.terms import is_followup, key_terms, keys, ordinal, shape, subject_terms, tokens_of
from generation.condense.words import condensing, stem
from retrieval.models import ChunkSearch

T = TypeVar("T")

__all__ = ["Condensed", "condense", "is_followup", "key_terms", "question_standalone", "subject_terms"]


@dataclass(frozen=True)
class Condensed:
    """A message and the standalone question made of it; ``carried`` is empty when it stood alone."""

    message: str
    question: str
    carried: tuple[str, ...] = ()
    antecedent: int | None = None  # index of the earlier turn whose terms were carried

    @property
    def rewritten(self) -> bool:
        return self.question != self.message

    def follows(self, turns: Sequence[T]) -> T | None:
        """The earlier turn whose topic this follow-up carries, of ``turns`` (one per earlier turn, oldest first: its
        log row, its answer); None when it carries none (it stood alone, or asks that turn again about another
        code)."""
        if not self.carried or self.antecedent is None or self.antecedent >= len(turns):
            return None
        return turns[self.antecedent]


def condense(
    message: str,
    history: list[str],
    *,
    indexed: Callable[[str], bool] | None = None,
    standalone: Sequence[str] | None = None,
) -> Condensed:
    """The standalone question for ``message`` after the earlier user turns ``history`` (oldest first).

    ``indexed``: whether the sources hold a word; a plain word they do not hold is not carried (rule 3).
    Deterministic: the same message, history and sources always give the same question. Each earlier
    turn is first made standalone itself, so a chain of follow-ups keeps the topic of the turn that
    started it; ``standalone``, when given, holds those questions as they were answered (one per turn of
    ``history``, as logged), read back instead.
    """
    message = " ".join(message.split())
    typed = [" ".join(turn.split()) for turn in history]
    prior = language.detect(" ".join(typed)) if typed else None
    with condensing(language.detect(message, prior=prior)):
        made: list[str] = []
        if standalone is not None:
            if len(standalone) != len(typed):
                raise ValueError(f"{len(standalone)} standalone questions for {len(typed)} earlier turns")
            made = [" ".join(question.split()) for question in standalone]
        else:
            for i, turn in enumerate(typed):
                made.append(_condense_one(turn, typed[:i], made, indexed).question)
        return _condense_one(message, typed, made, indexed)


def question_standalone(
    *,
    message: str,
    history: list[str],
    collection_ids: Sequence[int] | None = None,
    standalone: Sequence[str] | None = None,
) -> Condensed:
    """The question to answer for ``message`` after ``history``, by the configured ``retrieval.condense_model``.

    With an LLM the model's first line is the question; a model failure raises ``llm.LLMError`` (the
    caller reports it), never a silent fall back to the message as typed. Without history nothing is
    condensed and no model is called. The rule carries only plain words that the sources of ``collection_ids``
    (the asker's scope; None: every collection) hold; ``standalone``: the earlier turns' questions as answered
    (``condense``).
    """
    model = settings.FOUNDRY.retrieval.condense_model
    message = " ".join(message.split())
    if model == CONDENSE_RULE:
        holds = cache(partial(ChunkSearch.search.holds, collection_ids=collection_ids))  # each word looked up once
        return condense(message, history, indexed=holds, standalone=standalone)
    if model == "none" or not history:
        return Condensed(message, message)
    earlier = "\n".join(f"- {' '.join(turn.split())}" for turn in history)
    reply = llm.complete(
        messages=[{"role": "user", "content": prompts.render("condense", history=earlier, message=message)}],
        purpose="condense",
        model=model,
        max_tokens=120,
    )
    question = next((line.strip().strip('"') for line in reply.text.splitlines() if line.strip()), message)
    return Condensed(message, question or message)


def _condense_one(
    message: str, typed: list[str], standalone: list[str], indexed: Callable[[str], bool] | None
) -> Condensed:
    if not standalone or not is_followup(message):
        return Condensed(message, message)
    own = keys(message)
    overlaps = [len(own & keys(q)) for q in typed]
    best = max(overlaps)
    index = max(i for i, n in enumerate(overlaps) if n == best) if best else len(standalone) - 1
    tokens = tokens_of(message)
    place = ordinal(tokens, len(standalone))
    index = index if place is None else place
    again = _asked_again(message, standalone[index])
    if again:
        return Condensed(message, again, (), index)
    words = set(tokens)
    carried = tuple(
        t
        for t in subject_terms(standalone[index])
        if (t not in words if is_code_or_name(t) else stem(t.lower()) not in own)
        and (not shape(t) or shape(t) not in own)
        and (indexed is None or is_code_or_name(t) or indexed(t))
    )
    if not carried:
        return Condensed(message, message)
    return Condensed(message, f"{message} ({' '.join(carried)})", carried, index)


def _asked_again(message: str, antecedent: str) -> str:
    """The antecedent asked again about the one code the message puts in place of one of its own ("and E05?"
    after "What does E04 mean?" is "What does E05 mean?"; "and 2.4.1?" after "When was 2.3.0 released?"), when
    the message adds nothing else; "" otherwise. A code is swapped only for the antecedent's one code of its
    shape the message lacks. Names are not swapped: "the LED" is no kind of "RESET" button."""
    before = tokens_of(antecedent)
    known = keys(antecedent)
    terms = key_terms(message)
    new = [t for t in terms if is_code_or_name(t) and t not in before]
    if len(new) != 1 or not shape(new[0]) or any(stem(t.lower()) not in known for t in terms if t not in new):
        return ""
    words = set(tokens_of(message))
    old = {w for w in before if is_code_or_name(w) and w not in words and shape(w) == shape(new[0])}
    if len(old) != 1:
        return ""
    return re.sub(rf"(?<![\w.-]){re.escape(old.pop())}(?![\w-]|\.\w)", new[0], antecedent)
