"""The words a question asks and a unit holds, stemmed in the language being read (``reading``)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from functools import cache, wraps
from pathlib import Path
from typing import Any, TypeVar

from core import language
from core.grounding import content_tokens
from core.text import is_code_or_name


# A version or a decimal ("2.4.1", "10.8"): a word of its own, where a plain number is not (``stems``)
_DOTTED = re.compile(r"(?<![\w.])\d+(?:\.\d+)+(?!\.?\w)")
_NUMBER = re.compile(r"(?<![\w.-])\d[\d.,]*(?![\w-])")
_VERSIONS = re.compile(r"\d+(?:\.\d+)*\.[xX]")
_CODE = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9.\-]*[A-Za-z0-9])?")
# The language a question is read in: the question's and the passages' words are stemmed, and their stop words
# dropped, with that language's analyzer, so both sides of every comparison are read alike.
_READING: ContextVar[str] = ContextVar("reading_language", default=language.DEFAULT)
_F = TypeVar("_F", bound=Callable[..., Any])


DATA = Path(__file__).resolve().parent.parent / "data" / "reader"


@dataclass(frozen=True)
class Words:
    """One language's word classes of the reader (``generation/data/reader/<code>.json``); stems are that language's."""

    code: str
    rewrites: tuple[tuple[re.Pattern[str], str], ...]  # "how much" asks a number and names no word: read as "how"
    means: re.Pattern[str]  # "What does E03 mean?": group 1, when it takes part, holds what is meant
    defines: str  # "E04 means …": what follows a code that a unit defines, besides a dash or colon
    count_words: frozenset[str]  # a count in words ("eight", "both")
    duration: re.Pattern[str]  # a number with a unit of time or length: it holds ``lasting``
    lasting: str  # the stem of "long" in "how long"
    named_by: dict[str, frozenset[str]]  # a measure asked by its adjective or verb is stated by its noun
    light: frozenset[str]  # words of chat that name nothing an answer would hold
    embedded: re.Pattern[str]  # what comes before a question asked inside a statement
    asks_count: re.Pattern[str]  # "how many": a count answers
    asks_what_to_do: re.Pattern[str]  # "how do I …": an instruction answers
    instruction: re.Pattern[str]  # a unit opening with a verb (group "verb") and what it acts on
    not_verbs: frozenset[str]  # words that open a sentence and are no verb: articles, pronouns, prepositions
    asks_value: re.Pattern[str]  # a limit, range, size or setting: a value answers
    asks_other: re.Pattern[str]  # "what else": another than the answer before
    version_words: frozenset[str]  # stems of the words asking which version
    compounds: Compounds | None  # how the language joins words into one (None: it writes them apart)


@dataclass(frozen=True)
class Compounds:
    """How a language writes compounds as one word: parts of ``min_part`` letters or more, joined directly or by one
    of ``links`` ("Beschriftung-s-nummer"); ``stem`` is the language's stemmer, for a part taken off a compound."""

    min_part: int
    links: tuple[str, ...]
    stem: Callable[[str], str]


@cache
def words(code: str) -> Words:
    """The reader's word classes of language ``code`` (one of ``language.SUPPORTED``)."""
    raw = json.loads((DATA / f"{code}.json").read_text(encoding="utf-8"))
    stem = language.analyzer(code).stem

    def pattern(key: str) -> re.Pattern[str]:
        return re.compile(raw[key], re.IGNORECASE)

    return Words(
        code=code,
        rewrites=tuple((re.compile(find, re.IGNORECASE), put) for find, put in raw["rewrites"]),
        means=pattern("means"),
        defines=raw["defines"],
        count_words=frozenset(raw["count_words"]),
        duration=pattern("duration"),
        lasting=stem(raw["lasting"]),
        named_by={
            stem(word): frozenset(stem(noun) for noun in nouns.split())
            for asked, nouns in raw["named_by"]
            for word in asked.split()
        },
        light=frozenset(stem(word) for word in raw["light"]),
        embedded=pattern("embedded"),
        asks_count=pattern("asks_count"),
        asks_what_to_do=pattern("asks_what_to_do"),
        instruction=pattern("instruction"),
        not_verbs=frozenset(raw["not_verbs"]),
        asks_value=pattern("asks_value"),
        asks_other=pattern("asks_other"),
        version_words=frozenset(stem(word) for word in raw["version_words"]),
        compounds=Compounds(joined["min_part"], tuple(joined["links"]), stem) if (joined := raw["compounds"]) else None,
    )


def current() -> Words:
    """The word classes of the language being read (``reading``)."""
    return words(_READING.get())


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


def _values(text: str) -> set[str]:
    """``_numbers`` of ``text``, thousands separators aside ("1,000" is "1000")."""
    return {n.replace(",", "") for n in _numbers(text)}


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
    stem = language.analyzer(code).stem
    return {stem(word) for word in content_tokens(text, code)} | set(_DOTTED.findall(text))


def _own_words(question: str, typed: str) -> set[str]:
    """The stems of the words the asker typed that the standalone ``question`` keeps; every word of ``question``
    when it is not a follow-up, or the follow-up has no word of its own ("what about it?"). Of a message of several
    sentences, only those that ask (end with "?"): what it states before or after ("We keep a few spares in a
    warehouse.", "our firewall blocks most stuff") is context, counted with the words carried from earlier turns; so
    is what comes before a question asked inside a sentence (``Words.embedded``: "… needs to know which port that
    uses")."""
    asked = _asked_words(question)
    if typed:
        sentences = [x for x in re.split(r"(?<=[.!?])\s+", typed) if x.strip()]
        asking = [x for x in sentences if x.rstrip().endswith("?")]
        if len(sentences) > 1 and asking:
            typed = " ".join(asking)
        typed = current().embedded.sub(" ", typed)
    return (_asked_words(typed) & asked if typed else asked) or asked


def _asked_words(question: str) -> set[str]:
    """The stems of a question's content words, less the quantity its "how" asks ("how much", "how many", "how
    often"): the answer states a number, not the word ("How much does it weigh?" is answered by "weighs 210 g");
    less the "about" of "what about", which asks of what follows it; and less the "mean" of "what does … mean"
    ("meant") asked of a code or name: the answer says what it is ("**E03 – Supply voltage out of range.**");
    less words of chat (``Words.light``). The phrasings are the language's (``Words.rewrites``, ``Words.means``)."""
    read = current()
    for find, put in read.rewrites:
        question = find.sub(put, question)
    return stems(read.means.sub(_meaning_asked, question)) - read.light


def _meaning_asked(match: re.Match) -> str:
    """ "What does E03 mean?" without its "mean" when a code or name is what is meant ("What did the loss mean to
    France?" asks what followed from it, and keeps it)."""
    return (match.group(1) or "") if _meant(match) else match.group(0)


def _meant(match: re.Match) -> list[str]:
    """The codes and names a ``Words.means`` match asks the meaning of: those of its group 1 ("What does E03 mean?"),
    or the question's when the group takes no part ("what is meant by MTBF")."""
    return [token for token in _CODE.findall(match.group(1) or match.string) if _is_code(token)]


def _meant_codes(question: str) -> list[str]:
    """The codes whose meaning ``question`` asks ("What does E04 mean?", "what is meant by MTBF")."""
    return [code for match in current().means.finditer(question) for code in _meant(match)]


def _lasting(text: str) -> set[str]:
    """``{"long"}`` when ``text`` states a duration or a length ("within 60 s", "about 72 hours", "1,000 m"): it
    holds the "long" of "how long does it wait?"."""
    read = current()
    return {read.lasting} if read.duration.search(text) else set()


def _counts(text: str) -> bool:
    """Whether ``text`` states a count: a number standing alone ("up to 8"), or in words ("eight", "both"; not the
    "two" of "two-wire")."""
    alone = re.findall(r"(?<![\w-])[^\W\d_]+(?![\w-])", text.lower())
    return bool(_numbers(text)) or not current().count_words.isdisjoint(alone)


def _numbers(text: str) -> set[str]:
    """The numbers standing alone in ``text`` ("210", "2.4.1"; not the "200" of "PX-100")."""
    return {n.rstrip(".,") for n in _NUMBER.findall(text)}


def _holds(words: set[str], word: str) -> bool:
    """Whether ``words`` (stems) hold the question's ``word``: itself, the noun naming its measure (``named_by``), or,
    in a language that writes compounds as one word, as a compound's part or as the parts of it (``_in_compound``)."""
    read = current()
    return (
        word in words
        or bool(read.named_by.get(word, frozenset()) & words)
        or (read.compounds is not None and _in_compound(words, word, read.compounds))
    )


def _in_compound(words: set[str], word: str, compounds: Compounds) -> bool:
    """Whether ``word`` is the first or last part of a compound of ``words`` ("Nummer" of "Beschriftungsnummer",
    "Beschriftung" of "Beschriftungstext"), or is a compound whose last part and first part, less its link, both are
    among ``words`` ("Tastenkombination": "Kombination" and "Taste"). Parts are ``Compounds.min_part`` letters or
    more."""
    least = compounds.min_part
    if len(word) < least:
        return False
    if any(len(held) >= len(word) + least and (held.endswith(word) or held.startswith(word)) for held in words):
        return True
    for cut in range(least, len(word) - least + 1):
        if word[cut:] not in words:
            continue
        first = word[:cut]
        bare = (first[: len(first) - len(link)] for link in ("", *compounds.links) if first.endswith(link))
        if any(len(part) >= least and compounds.stem(part) in words for part in bare):
            return True
    return False
