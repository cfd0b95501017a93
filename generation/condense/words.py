"""The word classes the follow-up rule reads a message by, per language (``generation/data/followups/<code>.json``).

A language without a file here is read with ``language.DEFAULT``'s classes. The classes of the language being read
(``condensing``) are the ones every function of the rule sees, so a Dutch conversation is read with Dutch pronouns
and German nouns are not taken for names by their capital letters.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from core import language

DATA = Path(__file__).resolve().parent.parent / "data" / "followups"


@dataclass(frozen=True)
class Words:
    """One language's word classes (the data file's keys; see the module docstring of ``generation.condense``)."""

    code: str
    leads: tuple[str, ...]  # a message opening with one leans on the turn before ("and ", "what about")
    demonstratives: frozenset[str]
    relatives: frozenset[str]  # demonstratives that, after a noun or verb, are a relative pronoun or a conjunction
    pronouns: frozenset[str]
    third_person: frozenset[str]  # "does it use": the word after it is its verb
    question_starts: frozenset[str]
    auxiliaries: frozenset[str]
    adverbs: frozenset[str]
    do_forms: frozenset[str]  # "once I've done that": "that" is what was done
    verb_after: frozenset[str]  # a main verb after the subject
    announcing: frozenset[str]  # "what does it mean when": "it" announces the subject that follows
    mean_when: frozenset[tuple[str, str]]
    determiners: frozenset[str]
    indefinite_articles: frozenset[str]
    non_topic: frozenset[str]  # question words and fillers: never carried, never counted as content
    ordinals: dict[str, int]  # "the second one": the earlier turn of that place (0 is the first)
    ordinal_nouns: frozenset[str]
    measure_after: frozenset[str]  # "how long": the measure after it asks
    quantity_after: frozenset[tuple[str, str]]  # "how much power": the quantity after it asks
    owner_of: frozenset[str]  # "the range of the PX-100": the attribute of an owner named after it
    and_word: str
    contracted: re.Pattern[str] | None  # a contraction's ending ("what's"); None for a language that writes none
    unapostrophed: dict[str, str]  # contractions typed without their apostrophe ("whats": "what")
    participle: re.Pattern[str]  # a lower-case past participle ends a noun phrase: it is the verb
    nouns_capitalised: bool  # every noun is capitalised (German): a capital letter tells no name
    stop_words: frozenset[str]


@cache
def words(code: str) -> Words:
    """The word classes of language ``code`` (``language.DEFAULT``'s where it has no file)."""
    path = DATA / f"{code}.json"
    if not path.is_file():
        path = DATA / f"{language.DEFAULT}.json"
    raw = json.loads(path.read_text(encoding="utf-8"))

    def words_of(key: str) -> frozenset[str]:
        return frozenset(raw[key])

    return Words(
        code=raw["language"],
        leads=tuple(raw["leads"]),
        demonstratives=words_of("demonstratives"),
        relatives=words_of("relatives"),
        pronouns=words_of("pronouns"),
        third_person=words_of("third_person"),
        question_starts=words_of("question_starts"),
        auxiliaries=words_of("auxiliaries"),
        adverbs=words_of("adverbs"),
        do_forms=words_of("do_forms"),
        verb_after=words_of("verb_after"),
        announcing=words_of("announcing"),
        mean_when=frozenset(tuple(pair) for pair in raw["mean_when"]),
        determiners=words_of("determiners"),
        indefinite_articles=words_of("indefinite_articles"),
        non_topic=words_of("non_topic"),
        ordinals=dict(raw["ordinals"]),
        ordinal_nouns=words_of("ordinal_nouns"),
        measure_after=words_of("measure_after"),
        quantity_after=frozenset(tuple(pair) for pair in raw["quantity_after"]),
        owner_of=words_of("owner_of"),
        and_word=raw["and_word"],
        contracted=re.compile(raw["contracted"]) if raw["contracted"] else None,
        unapostrophed=dict(raw["unapostrophed"]),
        participle=re.compile(raw["participle"]),
        nouns_capitalised=raw["nouns_capitalised"],
        stop_words=language.analyzer(raw["language"]).stop_words,
    )


_CONDENSING: ContextVar[str] = ContextVar("condensing_language", default=language.DEFAULT)


@contextmanager
def condensing(code: str) -> Iterator[Words]:
    """Read in language ``code`` while the block runs."""
    token = _CONDENSING.set(code)
    try:
        yield words(code)
    finally:
        _CONDENSING.reset(token)


def current() -> Words:
    """The word classes of the language being read."""
    return words(_CONDENSING.get())


def stem(word: str) -> str:
    """The Snowball stem of a lower-cased word, in the language being read: "sensors" is "sensor"."""
    return language.analyzer(_CONDENSING.get()).stem(word)
