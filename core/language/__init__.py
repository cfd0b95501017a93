"""The language layer: which language a text is in, and how its words are read.

One analyzer per supported language (Dutch, German, English): a tokenizer, a Snowball stemmer and
the language's stop words and question words, read from ``data/<code>.json`` (language data never
lives in code). Every consumer that reads words (keyword search, grounding, condensing, the reader)
goes through this module, so a Dutch question is stemmed the way a Dutch passage was indexed.

Detection uses py3langid (BSD-3, its model ships in the wheel) restricted to the supported
languages: Foundry reads those three, and restricting keeps short questions from being taken for a
language nobody here writes. A text too short to tell takes the caller's prior, else ``DEFAULT``.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass
from functools import lru_cache, cache
from pathlib import Path
from typing import Any

import snowballstemmer

DATA = Path(__file__).with_name("data")
SUPPORTED = ("en", "nl", "de")
DEFAULT = "en"  # a text with no letters to tell by (a code, a number)
# A word: letters (any script), digits inside it, and inner hyphens or apostrophes ("IRC-Netzwerk", "don't").
_WORD = re.compile(r"[^\W\d_](?:[\w'’-]*\w)?")
_LETTER = re.compile(r"[^\W\d_]")
# Detection reads at most this many characters: a chunk's first few sentences tell its language.
DETECT_CHARS = 2000
# The languages the keyword index's tokenizer stems itself (FTS5 ``porter``): they need no stems column.
PORTER_STEMMED = ("en",)


@dataclass(frozen=True)
class Analyzer:
    """How one language's words are read: lower-cased tokens, stop words dropped, Snowball stems."""

    code: str
    name: str
    snowball: str
    stop_words: frozenset[str]
    question_words: frozenset[str]

    def tokens(self, text: str) -> list[str]:
        """The words of ``text``, lower-cased, in order."""
        return [w.lower() for w in _WORD.findall(text)]

    def content_tokens(self, text: str) -> list[str]:
        """The words of ``text`` that are not stop words, lower-cased, in order."""
        return [w for w in self.tokens(text) if w not in self.stop_words]

    def stem(self, word: str) -> str:
        """The Snowball stem of a lower-cased word."""
        return _stem(self.snowball, word)

    def stems(self, text: str) -> list[str]:
        """The stems of the content words of ``text``, in order (a hyphenated compound also gives its parts)."""
        out: list[str] = []
        for word in self.content_tokens(text):
            out.append(self.stem(word))
            if "-" in word:
                out += [self.stem(p) for p in word.split("-") if p and p not in self.stop_words]
        return out


@cache
def analyzer(code: str) -> Analyzer:
    """The analyzer of a supported language; ``ValueError`` naming the supported ones otherwise."""
    if code not in SUPPORTED:
        raise ValueError(f"language {code!r} is not supported; supported: {', '.join(SUPPORTED)}")
    data = json.loads((DATA / f"{code}.json").read_text(encoding="utf-8"))
    return Analyzer(
        code=code,
        name=data["name"],
        snowball=data["snowball"],
        stop_words=frozenset(data["stop_words"]),
        question_words=frozenset(data["question_words"]),
    )


def all_stop_words() -> frozenset[str]:
    """Every supported language's stop words: for text whose language is not known."""
    return _all_stop_words()


@lru_cache(maxsize=1)
def _all_stop_words() -> frozenset[str]:
    return frozenset().union(*(analyzer(code).stop_words for code in SUPPORTED))


def detect(text: str, *, prior: str | None = None) -> str:
    """The supported language ``text`` is most likely written in.

    A text too short or mixed to tell ("And E04?": the detector's probability under ``min_probability`` of
    ``data/detection.json``), or with no letters at all, is taken to be in ``prior`` (the conversation's or the
    interface's language) when one is given, else in ``DEFAULT``.
    """
    fallback = prior if prior in SUPPORTED else DEFAULT
    sample = text[:DETECT_CHARS]
    if not _LETTER.search(sample):
        return fallback
    code, probability = _identifier().classify(sample)
    return str(code) if probability >= _detection()["min_probability"] else fallback


@lru_cache(maxsize=1)
def _detection() -> dict:
    return json.loads((DATA / "detection.json").read_text(encoding="utf-8"))


def texts_languages(texts: list[str]) -> list[str]:
    """The language of each of a document's ``texts`` (its chunks), with the document's own language (read from
    its first ``DETECT_CHARS`` characters) as the prior of a text too short to tell."""
    document = detect(" ".join(texts)[:DETECT_CHARS])
    return [detect(text, prior=document) for text in texts]


def keyword_stems(text: str, code: str) -> str:
    """What the keyword index's stems column holds for ``text`` in language ``code``: its content words' Snowball
    stems, space-separated; "" for English, which the index's own tokenizer (FTS5 porter) stems already."""
    return "" if code in PORTER_STEMMED else " ".join(analyzer(code).stems(text))


# PostgreSQL's text-search configurations carry the Snowball stemmers' names ("dutch", "german", "english");
# a language without one is read by "simple" (lower-cased words, no stems, no stop words).
TEXT_SEARCH_FALLBACK = "simple"


def text_search_config(code: str) -> str:
    """The PostgreSQL text-search configuration for language ``code`` (the keyword index on PostgreSQL)."""
    return analyzer(code).snowball if code in SUPPORTED else TEXT_SEARCH_FALLBACK


def analyzer_for(text: str) -> Analyzer:
    """The analyzer of the language ``text`` is written in."""
    return analyzer(detect(text))


_lock = threading.Lock()


@lru_cache(maxsize=1)
def _identifier() -> Any:
    # Loading the model decompresses ~5 MB once per process; the lock keeps two threads from doing it twice.
    with _lock:
        from py3langid.langid import MODEL_FILE, LanguageIdentifier

        identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
        identifier.set_languages(list(SUPPORTED))
        return identifier


_local = threading.local()


@lru_cache(maxsize=1 << 17)
def _stem(snowball: str, word: str) -> str:
    return _stemmer(snowball).stemWord(word)


def _stemmer(name: str) -> Any:
    # A Snowball stemmer keeps state while it works: one per thread and language, never shared.
    cache = getattr(_local, "stemmers", None)
    if cache is None:
        cache = _local.stemmers = {}
    if name not in cache:
        cache[name] = snowballstemmer.stemmer(name)
    return cache[name]
