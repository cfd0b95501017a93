"""Rank fusion: pure functions over ranked lists of chunk hits, no database."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


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
