"""The dense matrix and its search: pure numpy over a memory-mapped float32 copy of the vectors.

Built, kept current and mapped by ``retrieval.dense``; this module only reads the arrays it is given.

- **Exact, not approximate** (up to a size: next point). Scores are cosine similarities
  from one product ``V @ q/|q|``; rows outside ``collection_ids`` get -inf; the best ``k`` chunks
  come from ``argpartition`` over the rows, each at its best row, sorted (ties by chunk id).
  Same chunks, same order and the same scores (to float rounding) as an exact KNN over
  vec0's chunk and window tables, so retrieval quality is
  unchanged. float32 rather than int8: numpy has no fast int8 product, and 1.5 GB per
  1M vectors lives once in the page cache, shared by every process that maps it.
- **Shortlisted above a size** (``retrieval.dense_exact_max_rows``, default 200,000). The
  product reads every byte of the matrix, ~55-110 ms at 1M rows. Above that size each
  search first ranks every row by the Hamming distance between its sign bits and the
  query's (``signs.npy``: one bit per dimension, 48 bytes a 384-d row, stored column-wise
  so each 64-bit word is one contiguous XOR and popcount over all rows), then scores only
  the ``retrieval.dense_shortlist`` nearest rows (and their ties) exactly, from the float32
  copy. The scores are exact; what can change is a true neighbour missing from the
  shortlist. Measured at 1M rows of real MiniLM vectors among distractors with their mean
  and covariance (``bench/dense_shortlist.py``): with 8,000, 98.7 % of the exact top 10
  kept, nDCG@10 -0.0003 (dense) / +0.0005 (hybrid), 13 ms against 108 ms.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from retrieval.fusion import Hit
from sources import vectorstore

DEAD = np.iinfo(np.int64).min  # the collection of a row whose vector vec0 no longer holds
SIGN_BLOCK = 65_536  # rows per block of the sign-bit pass (its working set, ~1 MB, stays in the CPU cache)


class DenseIndexError(Exception):
    """The dense matrix could not be built or read (the message says which file and why)."""


@dataclass(frozen=True)
class DenseMatrix:
    folder: Path
    version: str
    ids: np.ndarray  # int64 unit ids, one per row (``unit // WINDOW_SLOTS`` is the chunk)
    collections: np.ndarray  # int64 collection ids, one per row
    vectors: np.ndarray  # float32 (rows, dimension), unit rows, memory-mapped
    signs: np.ndarray  # uint64 (words, rows): each row's sign bits (``sign_words``), memory-mapped
    live: np.ndarray | None  # bool per row, False for a ``DEAD`` row; None when every row is live

    def search(
        self, vector: Sequence[float], *, k: int, collection_ids: Sequence[int] | None, shortlist: int = 0
    ) -> list[Hit]:
        """The ``k`` chunks nearest ``vector`` by cosine (of their best row), best first (ties by chunk id).

        ``shortlist`` 0 scores every row. Above 0, when more rows are in scope, every row is
        first ranked by the Hamming distance of its sign bits to the query's, and only the
        ``shortlist`` nearest by that (plus those tied with the last) are scored exactly: the
        same hits, unless one of the true best ``k`` falls outside the shortlist. A scope of
        no more rows than that is scored whole, exactly, without reading the other rows.
        """
        query = np.asarray(vector, dtype=np.float32)
        if query.shape != (self.vectors.shape[1],):
            raise DenseIndexError(
                f"query vector has {query.size} dimensions but {self.folder} holds {self.vectors.shape[1]}-d vectors"
            )
        norm = float(np.linalg.norm(query))
        query = query / norm if norm else query
        allowed = self.live
        if collection_ids is not None:  # DEAD is never a collection id
            allowed = np.isin(self.collections, np.asarray([int(i) for i in collection_ids], dtype=np.int64))
        available = self.ids.size if allowed is None else int(allowed.sum())
        k = min(int(k), available)
        if k <= 0:
            return []
        rows = None
        if 0 < shortlist and max(shortlist, k) < available:
            rows = self._shortlist(query, max(shortlist, k), allowed)
        elif 0 < shortlist and allowed is not None:  # a scope no bigger than the shortlist: score just it
            rows = np.flatnonzero(allowed)
        if rows is not None:
            ids, scores = self.ids[rows], np.asarray(self.vectors[rows] @ query)
        else:
            ids, scores = self.ids, self.vectors @ query
            if allowed is not None:
                scores = np.where(allowed, scores, -np.inf)
        chunks = ids // vectorstore.WINDOW_SLOTS
        return [Hit(int(chunks[i]), float(scores[i])) for i in best_per_chunk(chunks, scores, k)]

    def _shortlist(self, query: np.ndarray, size: int, allowed: np.ndarray | None) -> np.ndarray:
        """Rows (ascending) whose sign bits are nearest the query's: the ``size`` nearest and their ties.

        Done in blocks of ``SIGN_BLOCK`` rows, each finished (distances, scope, histogram) while it
        is in the CPU cache: ~30 ms instead of ~57 ms for 4.1M rows here, and less memory traffic
        beside the BM25 query running on the other core.
        """
        rows, beyond = self.ids.size, 64 * self.signs.shape[0] + 1  # beyond: farther than any row, out of scope
        distance, histogram = np.empty(rows, np.uint16), np.zeros(beyond + 1, np.int64)
        scratch, counts = np.empty(SIGN_BLOCK, np.uint64), np.empty(SIGN_BLOCK, np.uint8)
        words = sign_words(query[None, :])[0]
        for start in range(0, rows, SIGN_BLOCK):
            block = slice(start, min(start + SIGN_BLOCK, rows))
            width = block.stop - start
            part = distance[block]
            part[:] = 0
            for word, column in zip(words, self.signs):
                np.bitwise_xor(column[block], word, out=scratch[:width])
                np.bitwise_count(scratch[:width], out=counts[:width])
                part += counts[:width]
            if allowed is not None:
                part[~allowed[block]] = beyond
            histogram += np.bincount(part, minlength=beyond + 1)
        return np.flatnonzero(distance <= int(np.searchsorted(np.cumsum(histogram), size)))


def best_per_chunk(chunks: np.ndarray, scores: np.ndarray, k: int) -> np.ndarray:
    """Rows of the ``k`` best chunks, each at its best-scoring row, best first (ties by chunk id).

    A chunk has several rows (its own vector and its windows'), so the best ``k`` rows may
    hold fewer than ``k`` chunks: the pass widens until they hold ``k`` or every row is in.
    Rows scored -inf (out of scope) are never returned.
    """
    width = min(4 * k, scores.size)
    while True:
        top = np.argpartition(-scores, width - 1)[:width] if width < scores.size else np.arange(scores.size)
        order = top[np.lexsort((chunks[top], -scores[top]))]
        _, first = np.unique(chunks[order], return_index=True)
        if first.size >= k or width == scores.size:
            picked = order[np.sort(first)[:k]]
            return picked[np.isfinite(scores[picked])]
        width = min(4 * width, scores.size)


def contained(values: np.ndarray, pool: np.ndarray) -> np.ndarray:
    """``np.isin(values, pool)`` by one sort and a binary search: 0.3 s against numpy's 3.3 s
    for 4M ids each (a refresh at 1M chunks with their windows)."""
    if not pool.size:
        return np.zeros(values.shape, bool)
    pool = np.sort(pool)
    return pool[np.minimum(np.searchsorted(pool, values), pool.size - 1)] == values


def sign_word_count(dimension: int) -> int:
    return -(-dimension // 64)


def sign_words(vectors: np.ndarray) -> np.ndarray:
    """One bit per dimension (1 where > 0), packed into uint64 words: shape (rows, ceil(dimension / 64))."""
    bits = np.packbits(vectors > 0, axis=1)
    padded = np.zeros((bits.shape[0], sign_word_count(vectors.shape[1]) * 8), np.uint8)
    padded[:, : bits.shape[1]] = bits
    return padded.view(np.uint64)
