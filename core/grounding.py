"""Citation and grounding check of a generated text before anyone sees it.

Every sentence must be supported by a passage of the context:
- a cited id that is not in the context (phantom or off-by-one) is discarded;
- support is judged against windows of two consecutive sentences of a passage
  (a whole passage is big enough to contain stray matching words and numbers):
  word overlap plus embedding similarity, and every number in the sentence must
  occur in the window next to a word the sentence puts next to it (a changed value is the
  most harmful hallucination, and a window often holds other numbers that count other things);
- a sentence whose cited passage does not support it is attributed to the passage
  that does, if any; otherwise the sentence is removed.
``coverage`` = supported sentences / sentences the model wrote.

``Grounder`` runs the check with real embeddings: one embedding call per batch of new text pieces.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from django.conf import settings
from django.utils.translation import gettext_noop

from core import llm
from core import language


# Marked for translation, kept in English: the model is told to answer with it; an answer shows it translated.
REFUSAL = gettext_noop("The indexed documentation does not contain this information.")
MIN_LEXICAL = 0.5
_CITATION = re.compile(r"\[\s*(S?\d+(?:\s*[,;]\s*S?\d+)*)\s*\]|\(\s*(S\d+(?:\s*[,;]\s*S?\d+)*)\s*\)")
_BARE_ID = re.compile(r"\bS(\d+)\b")
# A sentence ends after . ! ? and the citation markers that follow it; never before markers that end the line.
_BOUNDARY = re.compile(r"(?<=[.!?])((?:\s*\[[^\]\n]{1,40}\])*)\s+(?=\S)(?!(?:\[[^\]\n]{1,40}\]\s*)+$)")
_WORD = re.compile(r"[A-Za-zÀ-ÿ][A-Za-zÀ-ÿ0-9\-]{2,}")
_TOKEN = re.compile(r"\d+(?:[.,]\d+)*|[A-Za-zÀ-ÿ][A-Za-zÀ-ÿ\-]*")
NUMBER_REACH = 4  # tokens on either side of a number that say what it counts


@dataclass
class Sentence:
    text: str  # without citation markers
    cited: list[str]  # ids as written (S1 …)
    supported_by: str = ""  # the passage id that supports it, "" if none
    support: float = 0.0
    valid_citation: bool = False


@dataclass
class Grounded:
    text: str
    sentences: list[Sentence] = field(default_factory=list)
    coverage: float | None = None
    invalid_citations: list[str] = field(default_factory=list)
    refused: bool = False
    total: int = 0  # sentences the model wrote (refusal phrases and repeats not counted)
    supported: int = 0

    def audit(self, output: str) -> dict:
        """For the audit trail: what the model wrote and the verdict on each sentence (a sentence
        with no ``supported_by`` was removed from the answer)."""
        return {
            "model_output": output,
            "refused": self.refused,
            "invalid_citations": self.invalid_citations,
            "sentences": [
                {"text": s.text, "cited": s.cited, "supported_by": s.supported_by, "support": round(s.support, 4)}
                for s in self.sentences
            ],
        }

    @property
    def cited_ids(self) -> list[str]:
        seen: dict[str, None] = {}
        for s in self.sentences:
            if s.supported_by:
                seen[s.supported_by] = None
        return list(seen)


_FINISHED = re.compile(r"[.!?][\"')\]]*(?:\s*\[[^\]\n]{1,40}\])*(?=\s|$)")


def reply_text(reply: llm.Completion, max_tokens: int) -> str:
    """The model's reply to ground: without its last, unfinished sentence when the token limit cut it off."""
    return unfinished_cut(reply.text) if reply.completion_tokens >= max_tokens else reply.text


def unfinished_cut(text: str) -> str:
    """``text`` without what follows its last finished sentence (a fragment a token limit cut off).

    Only the last line is looked at: the lines above it were ended by the model itself.
    """
    head, _, last = text.rstrip().rpartition("\n")
    ends = list(_FINISHED.finditer(last))
    kept = last[: ends[-1].end()] if ends else ""
    return "\n".join(part for part in (head, kept) if part).rstrip()


def split_sentences(text: str) -> list[Sentence]:
    """Sentences with the citation markers that follow or end them."""
    out: list[Sentence] = []
    for line in text.splitlines():
        line = re.sub(r"^\s*(?:[-*•]|\d+[.)])\s+", "", line).strip()
        if not line:
            continue
        parts = _BOUNDARY.split(line)
        for i in range(0, len(parts), 2):
            raw = parts[i] + (parts[i + 1] if i + 1 < len(parts) else "")
            ids = citation_ids(raw)
            clean = " ".join(_BARE_ID.sub("", _CITATION.sub("", raw)).split()).strip()
            clean = re.sub(r"\s+([.,;:!?])", r"\1", clean)
            if re.search(r"\w", clean):
                out.append(Sentence(clean, ids))
    return out


def citation_ids(text: str) -> list[str]:
    ids: list[str] = []
    for match in _CITATION.finditer(text):
        for part in re.split(r"[,;]", match.group(1) or match.group(2)):
            ids.append("S" + part.strip().lstrip("Ss"))
    ids += [f"S{n}" for n in _BARE_ID.findall(_CITATION.sub("", text))]
    return list(dict.fromkeys(ids))


def content_tokens(text: str, code: str | None = None) -> list[str]:
    """The words of ``text`` that are not stop words of its language ``code`` (detected when not given),
    lower-cased, in order."""
    stop_words = language.analyzer(code or language.detect(text)).stop_words
    return [low for low in (w.lower() for w in _WORD.findall(text)) if low not in stop_words]


def content_words(text: str, code: str | None = None) -> set[str]:
    """The Snowball stems of ``text``'s content words, in its language ``code`` (detected when not given)."""
    analyzer = language.analyzer(code or language.detect(text))
    return {analyzer.stem(w) for w in content_tokens(text, analyzer.code)}


def _number(token: str) -> str:
    return token.replace(",", ".").rstrip(".")


def number_contexts(text: str) -> dict[str, list[set[str]]]:
    """Each number of ``text`` with, per occurrence, the words within NUMBER_REACH tokens of it
    (lower-cased and stemmed like ``content_words``; units such as V or mA count, stop words do not)."""
    tokens = _TOKEN.findall(text)
    analyzer = language.analyzer_for(text)
    stop_words = analyzer.stop_words
    out: dict[str, list[set[str]]] = {}
    for i, token in enumerate(tokens):
        if token[0].isdigit():
            near = tokens[max(0, i - NUMBER_REACH) : i] + tokens[i + 1 : i + 1 + NUMBER_REACH]
            out.setdefault(_number(token), []).append(
                {analyzer.stem(t.lower()) for t in near if not t[0].isdigit() and t.lower() not in stop_words}
            )
    return out


def numbers_supported(sentence: str, passage: str) -> bool:
    """Every number of ``sentence`` occurs in ``passage`` next to a word the sentence puts next to it
    (anywhere, when the sentence puts no word next to it). A number in the passage that counts
    something else does not support it: "supports up to 10 sensors" is not supported by
    "up to 8 sensors, isolated (1.5 kV)" followed by "10/100 Mbit/s Ethernet"."""
    theirs = number_contexts(passage)
    for number, contexts in number_contexts(sentence).items():
        if number not in theirs:
            return False
        if any(words and not any(words & other for other in theirs[number]) for words in contexts):
            return False
    return True


def lexical_support(sentence: str, passage: str) -> float:
    words = content_words(sentence)
    if not words:
        return 0.0
    return len(words & content_words(passage)) / len(words)


Similarity = Callable[[str, str], float]  # (answer sentence, passage window) -> cosine similarity


def passage_windows(passage: str) -> list[str]:
    """Overlapping two-sentence windows of a passage (the passage itself if it is one sentence)."""
    sentences = [s.text for s in split_sentences(passage)] or [passage]
    if len(sentences) == 1:
        return sentences
    return [f"{a} {b}" for a, b in zip(sentences, sentences[1:])]


def ground(text: str, passages: dict[str, str], *, similarity: Similarity, min_support: float) -> Grounded:
    """Check every sentence of ``text`` against ``passages`` (id -> passage text)."""
    sentences = split_sentences(text)
    if not sentences or all(is_refusal(s.text) for s in sentences):
        return Grounded(text=REFUSAL, sentences=[], coverage=None, refused=True)
    result = Grounded(text="")
    kept: list[str] = []
    seen_text: set[str] = set()
    countable = {s.text.lower() for s in sentences if not is_refusal(s.text)}
    for sentence in sentences:
        if is_refusal(sentence.text) or sentence.text.lower() in seen_text:
            continue
        seen_text.add(sentence.text.lower())
        valid = [c for c in sentence.cited if c in passages]
        result.invalid_citations += [c for c in sentence.cited if c not in passages]
        sentence.valid_citation = bool(valid)
        order = valid + [pid for pid in passages if pid not in valid]
        for pid in order:
            score = max(
                _support(sentence.text, window, similarity(sentence.text, window))
                for window in passage_windows(passages[pid])
            )
            if score >= min_support and score > sentence.support:
                sentence.supported_by, sentence.support = pid, score
                if pid in valid:
                    break  # the model's own citation holds: keep it
        result.sentences.append(sentence)
        if sentence.supported_by:
            kept.append(f"{sentence.text} [{sentence.supported_by}]")
    result.supported = sum(1 for s in result.sentences if s.supported_by)
    result.total = len(countable)
    result.coverage = round(result.supported / result.total, 4) if result.total else None
    result.text = " ".join(kept)
    return result


def _support(sentence: str, passage: str, cosine: float) -> float:
    """0..1: mean of word overlap and embedding similarity.

    0 when a number of the sentence is not in the passage next to a word the sentence puts next
    to it (``numbers_supported``), or when fewer than
    MIN_LEXICAL of its content words are: embedding similarity alone rewards
    fluent sentences on the right topic, which is what a hallucination is.
    """
    lexical = lexical_support(sentence, passage)
    if lexical < MIN_LEXICAL or not numbers_supported(sentence, passage):
        return 0.0
    return 0.5 * lexical + 0.5 * max(0.0, cosine)


def is_refusal(sentence: str) -> bool:
    return "does not contain this information" in sentence.lower()


class Passage(Protocol):
    """A passage given to the model: its label (``S1``) and its text."""

    @property
    def label(self) -> str: ...

    @property
    def text(self) -> str: ...


class Grounder:
    """Checks texts against the passages given to the model (see ``ground``).

    ``included`` is the passages (retrieval candidates), or (on a compute worker, which has
    no database rows) their texts by label. ``embedding_model`` and ``min_support`` default
    to the settings.
    """

    def __init__(
        self,
        included: Sequence[Passage] | Mapping[str, str],
        *,
        embedding_model: str | None = None,
        min_support: float | None = None,
    ) -> None:
        self.passages = dict(included) if isinstance(included, Mapping) else {p.label: p.text for p in included}
        self.embedding_model = embedding_model or settings.FOUNDRY.embedding.model
        self.min_support = settings.FOUNDRY.generation.min_support if min_support is None else min_support
        self.vectors: dict[str, list[float]] = {}
        self.prime([w for p in self.passages.values() for w in passage_windows(p)])

    def prime(self, pieces: list[str]) -> None:
        """Embed, in one call, every sentence of ``pieces`` not embedded yet."""
        wanted = [s.text for piece in pieces for s in split_sentences(piece)] + pieces
        missing = [p for p in dict.fromkeys(wanted) if p not in self.vectors]
        if missing:
            vectors = llm.embed(missing, model=self.embedding_model)
            self.vectors.update(zip(missing, vectors))

    def similarity(self, sentence: str, window: str) -> float:
        a, b = self.vectors.get(sentence), self.vectors.get(window)
        return sum(x * y for x, y in zip(a, b)) if a and b else 0.0

    def ground(self, text: str) -> Grounded:
        self.prime([text])
        return ground(text, self.passages, similarity=self.similarity, min_support=self.min_support)
