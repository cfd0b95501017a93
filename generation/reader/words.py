"""The words a question asks and a unit holds, stemmed in the language being read (``reading``)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import lru_cache, wraps
from typing import Any, TypeVar

from core import language
from core.grounding import content_tokens
from core.text import is_code_or_name


_HOW_QUANTITY = re.compile(r"\bhow\s+(?:much|many|often)\b", re.IGNORECASE)  # asks a number, names no word
_WHAT_ABOUT = re.compile(r"\b(what|how)\s+about\b", re.IGNORECASE)  # "what about its weight?" asks of the weight
# "What does E03 mean?", "what is meant by MTBF": the verb asks what a code or name is, which its answer states
_MEANS = re.compile(r"\b((?:does|do|did)\b[^?]*?)\bmean\b|\bmeant\b", re.IGNORECASE)
# A version or a decimal ("2.4.1", "10.8"): a word of its own, where a plain number is not (``stems``)
_DOTTED = re.compile(r"(?<![\w.])\d+(?:\.\d+)+(?!\.?\w)")
_NUMBER = re.compile(r"(?<![\w.-])\d[\d.,]*(?![\w-])")
_COUNT_WORDS = frozenset(
    """one two three four five six seven eight nine ten eleven twelve fifteen twenty thirty forty fifty hundred
    thousand million billion dozen dozens single both none""".split()
)
_DURATION = re.compile(
    r"\d\s*(?:ms|s|sec|seconds?|min|minutes?|h|hours?|days?|weeks?|months?|years?|mm|cm|m|km)\b", re.IGNORECASE
)
_VERSIONS = re.compile(r"\d+(?:\.\d+)*\.[xX]")
_CODE = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9.\-]*[A-Za-z0-9])?")
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


def _holds(words: set[str], word: str) -> bool:
    return word in words or bool(_NAMED_BY.get(word, set()) & words)
