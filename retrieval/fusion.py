"""Rank fusion: pure functions over ranked lists of chunk hits, no database."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class Hit:
    chunk_id: int
    score: float


def reciprocal_rank_fusion(
    channels: dict[str, list[Hit]], *, k: int = 60, weights: dict[str, float] | None = None
) -> list[Hit]:
    """Fuse ranked lists: score(d) = sum over channels of weight / (k + rank), rank from 1."""
    scores: dict[int, float] = {}
    for name, hits in channels.items():
        weight = (weights or {}).get(name, 1.0)
        for rank, hit in enumerate(hits, start=1):
            scores[hit.chunk_id] = scores.get(hit.chunk_id, 0.0) + weight / (k + rank)
    return [Hit(cid, s) for cid, s in sorted(scores.items(), key=lambda item: (-item[1], item[0]))]


def document_rank_fusion(
    channels: dict[str, list[Hit]],
    *,
    source_of: Mapping[int, int],
    k: int = 60,
    weights: dict[str, float] | None = None,
) -> list[Hit]:
    """Fuse ranked chunk lists per document (source), then return the chunks.

    In each channel a source ranks where its best chunk ranks, counting sources
    (the source of the channel's first hit is rank 1, the next new source rank 2, ...).
    score(source) = sum over channels of weight / (k + rank), as in
    ``reciprocal_rank_fusion``, so a source found by BM25 through one chunk and by
    dense search through another gets credit from both. Chunks come out grouped by
    source, sources best first; within a source, by their chunk-level RRF score.
    Each hit's ``score`` is its source's fused score. A chunk missing from
    ``source_of`` is its own source (it cannot be merged with anything).
    """
    doc_channels: dict[str, list[Hit]] = {}
    for name, hits in channels.items():
        seen: dict[int, None] = {}
        for hit in hits:
            seen.setdefault(_source_key(hit.chunk_id, source_of), None)
        doc_channels[name] = [Hit(doc, 0.0) for doc in seen]
    doc_score = {h.chunk_id: h.score for h in reciprocal_rank_fusion(doc_channels, k=k, weights=weights)}
    chunk_fused = reciprocal_rank_fusion(channels, k=k, weights=weights)
    within = {h.chunk_id: index for index, h in enumerate(chunk_fused)}
    doc_order = {doc: index for index, doc in enumerate(doc_score)}
    ordered = sorted(chunk_fused, key=lambda h: (doc_order[_source_key(h.chunk_id, source_of)], within[h.chunk_id]))
    return [Hit(h.chunk_id, doc_score[_source_key(h.chunk_id, source_of)]) for h in ordered]


def _source_key(chunk_id: int, source_of: Mapping[int, int]) -> int:
    """The source of a chunk; an unknown chunk gets a key of its own (negative: never a source id)."""
    source = source_of.get(chunk_id)
    return source if source is not None else -chunk_id - 1


def word_set(text: str) -> frozenset[str]:
    """The distinct words of ``text``, case aside: what ``revisions`` compares."""
    return frozenset(_WORD.findall(text.casefold()))


@dataclass(frozen=True)
class ChunkFacts:
    """What ``revisions`` and ``recency_boost`` read of each chunk, by id: its source's date (a timestamp, None
    undated), its source and its words (``word_set``)."""

    dated: Mapping[int, float | None]
    source_of: Mapping[int, int]
    words: Mapping[int, frozenset[str]]


def revisions(
    hits: list[Hit], facts: ChunkFacts, *, overlap: float, asked: frozenset[str] = frozenset()
) -> list[list[int]]:
    """Groups of hits that are revisions of one text: chunks of different sources whose word sets overlap by
    ``overlap`` (> 0) or more (Jaccard: shared words over all words) and that hold the same words of the question
    (``asked``), joined transitively; groups of two or more, each in the order of ``hits``. The datasheets of two
    products written from one template overlap as much as two revisions of one, but a question that names one
    product tells them apart."""
    ids = [h.chunk_id for h in hits]
    parent = {chunk: chunk for chunk in ids}

    def root(chunk: int) -> int:
        while parent[chunk] != chunk:
            parent[chunk] = parent[parent[chunk]]
            chunk = parent[chunk]
        return chunk

    words = {chunk: facts.words.get(chunk, frozenset()) for chunk in ids}
    for a, b in similar_pairs(words, overlap):
        if facts.source_of.get(a) != facts.source_of.get(b) and words[a] & asked == words[b] & asked:
            parent[root(b)] = root(a)
    groups: dict[int, list[int]] = {}
    for chunk in ids:
        groups.setdefault(root(chunk), []).append(chunk)
    return [g for g in groups.values() if len(g) > 1]


def similar_pairs(sets: Mapping[int, frozenset[str]], threshold: float) -> list[tuple[int, int]]:
    """Every pair of keys of ``sets`` whose non-empty sets have a Jaccard similarity of ``threshold`` (> 0) or more,
    found without comparing every pair (PPJoin: Xiao et al., "Efficient similarity joins for near duplicate
    detection", WWW 2008). With the words of every set in one order, rarest first, two sets that similar share a word
    among the first |s| − ⌈t·|s|⌉ + 1 of each (prefix filter); sets are taken smallest first, so one that is too small
    is passed over (size filter); and a pair whose shared words so far, plus the most the rest of both could share,
    falls short of the overlap the threshold needs is dropped (positional filter). What is left is counted in full."""
    if threshold <= 0:
        raise ValueError(f"similar_pairs: the threshold must be above 0, got {threshold}")
    frequency = Counter(word for words in sets.values() for word in words)
    indexed: dict[str, list[tuple[int, int]]] = {}  # word: (key, position) of the sets it opens
    pairs = []
    for key in sorted((k for k, s in sets.items() if s), key=lambda k: len(sets[k])):
        words = sets[key]
        size = len(words)
        ordered = sorted(words, key=lambda w: (frequency[w], w))
        shared: dict[int, int] = {}
        dropped: set[int] = set()
        # The 1e-9 keeps a product such as 0.7 × 10 = 7.000000000000001 from shortening a prefix.
        for i, word in enumerate(ordered[: size - math.ceil(threshold * size - 1e-9) + 1]):
            for other, j in indexed.get(word, ()):
                other_size = len(sets[other])
                if other in dropped or other_size < threshold * size - 1e-9:
                    continue
                needed = math.ceil(threshold / (1 + threshold) * (size + other_size) - 1e-9)
                if shared.get(other, 0) + 1 + min(size - i - 1, other_size - j - 1) >= needed:
                    shared[other] = shared.get(other, 0) + 1
                else:
                    dropped.add(other)
        for other in shared.keys() - dropped:
            common = len(words & sets[other])
            if common >= threshold * (size + len(sets[other]) - common):
                pairs.append((other, key))
        # Indexed: the shorter prefix a larger set, met later, must share a word of.
        for i, word in enumerate(ordered[: size - math.ceil(2 * threshold / (1 + threshold) * size - 1e-9) + 1]):
            indexed.setdefault(word, []).append((key, i))
    return pairs


def recency_boost(
    hits: list[Hit], facts: ChunkFacts, *, weight: float, overlap: float, asked: frozenset[str] = frozenset()
) -> list[Hit]:
    """Put the later revision of a text first: within each group of ``revisions`` (near-identical chunks of
    different sources), the group's hits are ordered by fused score × (1 + ``weight`` × r), r the place of the
    source's date (``facts.dated``) among the group's dates, 0 for the oldest (and undated) to 1 for the newest,
    and take the places in the list the group held. A datasheet and its revision match a question nearly equally,
    and the newer one then comes first; a revision matching clearly better (by more than the weight) keeps its
    lead. Nothing moves past a hit outside the group, and hits that are no one's revision keep their places,
    whatever their dates. Each hit keeps its own score. ``asked``: the question's words (``word_set``), see
    ``revisions``."""
    if weight <= 0:
        return hits
    ranked = list(hits)
    places = {h.chunk_id: i for i, h in enumerate(hits)}
    for group in revisions(hits, facts, overlap=overlap, asked=asked):
        dates = sorted({d for d in (facts.dated.get(c) for c in group) if d is not None})
        if len(dates) < 2:
            continue
        place = {d: i / (len(dates) - 1) for i, d in enumerate(dates)}
        boosted = sorted(
            (
                -hits[places[c]].score * (1 + weight * (place[d] if (d := facts.dated.get(c)) is not None else 0.0)),
                places[c],
            )
            for c in group
        )
        for slot, (_, was) in zip(sorted(places[c] for c in group), boosted):
            ranked[slot] = hits[was]
    return ranked
