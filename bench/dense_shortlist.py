"""The dense matrix's sign-bit shortlist at scale: what it loses against the exact scan, and what it saves.

    nice .venv/bin/python bench/dense_shortlist.py [--rows 1000000] [--shortlists 500,1000,2000,4000] \
        [--queries 300] [--json FILE]

Needs the SciFact eval index (built by ``foundry eval retrieval`` in the same FOUNDRY_HOME).
The matrix holds the index's real MiniLM rows (chunk and sentence-window vectors) plus ``rows``
minus those of distractors drawn from a Gaussian with the real vectors' mean and covariance (then unit
length): their bits are as skewed as real MiniLM vectors' (the weak point of sign bits),
unlike uniform random vectors, and they crowd the real neighbours as a large base would
(with windows, ~4.1 rows per chunk: ``--rows 4100000`` is a 1M-chunk base). Queries are the train
claims' real MiniLM vectors. Per shortlist size (the
product's ``DenseMatrix.search``, k=50 as in ``retrieve()``): the share of the exact top 10
and top 50 it returns, nDCG@10 over the real documents (a distractor is never relevant) of
the dense channel and of hybrid search (RRF k=60 with the product's BM25 channel on the real
chunks, depth 50, as shipped), and P50/P95 ms per search against the exact scan of the same matrix.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import _common
import numpy as np
from django.conf import settings

from core import llm
from foundry_site.evaluation import metrics
from retrieval import dense
from retrieval.dense import DenseMatrix, sign_words
from retrieval.fusion import Hit, reciprocal_rank_fusion
from retrieval.models import ChunkSearch
from sources import vectorstore

K = 50
BLOCK = 100_000


def with_distractors(ids: np.ndarray, real: np.ndarray, rows: int, rng: np.random.Generator) -> DenseMatrix:
    """The real rows plus Gaussian distractors (same mean and covariance), ids above the real ones.

    Distractors come as the real rows do: a chunk's own vector and, for as many windows per
    chunk as the real index averages, window vectors as near their chunk as the real ones are
    (the same mean cosine), so a shortlist spends its slots on a chunk's several rows as it
    would in a store of that many real chunks.
    """
    extra = max(0, rows - len(ids))
    group = max(1, round(len(ids) / int(np.sum(ids % vectorstore.WINDOW_SLOTS == 0))))  # rows per chunk
    mean, factor = real.mean(axis=0), np.linalg.cholesky(np.cov(real.T) + 1e-6 * np.eye(real.shape[1]))
    spread = _window_spread(ids, real, factor, rng) if group > 1 else 0.0
    vectors = np.empty((len(ids) + extra, real.shape[1]), np.float32)
    vectors[: len(ids)] = real
    first = ids.max() // vectorstore.WINDOW_SLOTS + 1
    extra_ids = np.empty(extra, np.int64)
    for start in range(0, extra, BLOCK - BLOCK % group):
        count = min(BLOCK - BLOCK % group, extra - start)
        chunks = -(-count // group)
        base = mean + rng.standard_normal((chunks, real.shape[1])) @ factor.T
        block = np.repeat(base, group, axis=0)[:count]
        slot = np.arange(count) % group  # 0: the chunk's own row; above: its windows, near it
        block[slot > 0] += spread * rng.standard_normal((int(np.sum(slot > 0)), real.shape[1])) @ factor.T
        vectors[len(ids) + start : len(ids) + start + count] = block / np.linalg.norm(block, axis=1, keepdims=True)
        extra_ids[start : start + count] = (
            first + start // group + np.arange(count) // group
        ) * vectorstore.WINDOW_SLOTS + slot
    return DenseMatrix(
        folder=Path("<memory>"),
        version="",
        ids=np.concatenate([ids, extra_ids]),
        collections=np.zeros(len(ids) + extra, np.int64),
        vectors=vectors,
        signs=np.ascontiguousarray(sign_words(vectors).T),
    )


def _window_spread(ids: np.ndarray, real: np.ndarray, factor: np.ndarray, rng: np.random.Generator) -> float:
    """The noise scale (in units of the real covariance) that puts a synthetic window as near its
    chunk, by mean cosine, as the real windows are to theirs."""
    chunk, own = ids // vectorstore.WINDOW_SLOTS, ids % vectorstore.WINDOW_SLOTS == 0
    row_of = dict(zip(chunk[own].tolist(), np.flatnonzero(own).tolist()))
    window_rows = np.flatnonzero(~own)
    chunk_rows = np.array([row_of[c] for c in chunk[window_rows].tolist()])  # every window's chunk has a row
    target = float(np.mean(np.sum(real[chunk_rows] * real[window_rows], axis=1)))
    base = real.mean(axis=0) + rng.standard_normal((2000, real.shape[1])) @ factor.T
    noise = rng.standard_normal(base.shape) @ factor.T
    unit = lambda v: v / np.linalg.norm(v, axis=1, keepdims=True)  # noqa: E731
    low, high = 0.0, 4.0
    for _ in range(30):  # the mean cosine falls as the spread grows: bisect
        mid = (low + high) / 2
        cosine = float(np.mean(np.sum(unit(base) * unit(base + mid * noise), axis=1)))
        low, high = (mid, high) if cosine > target else (low, mid)
    print(
        f"windows: {window_rows.size} real, mean cosine to their chunk {target:.3f}; synthetic spread {low:.3f}",
        file=sys.stderr,
    )
    return low


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--shortlists", default="500,1000,2000,4000")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    model = settings.FOUNDRY.embedding.model
    with _common.scifact() as beir:
        copy, _ = dense.current(model)  # the product's unit-length copy of the index's vectors
        ids, real = copy.ids, np.asarray(copy.vectors)
        doc_of = beir.index.doc_of_chunk
        names = list(beir.queries)[: args.queries]
        vectors = llm.embed([beir.queries[q] for q in names], model=model)
        keyword = [
            ChunkSearch.search.keyword(beir.queries[q], limit=K, max_df=settings.FOUNDRY.retrieval.bm25_max_df)
            for q in names
        ]
    print(f"machine: {_common.machine_line()}; {len(ids)} real vectors, {len(names)} claims", file=sys.stderr)
    matrix = with_distractors(ids, real, args.rows, np.random.default_rng(0))
    print(f"matrix: {len(matrix.ids)} rows", file=sys.stderr)

    def hybrid(hits: list[list[int]]) -> list[list[int]]:
        return [
            [
                h.chunk_id
                for h in reciprocal_rank_fusion({"bm25": bm25, "dense": [Hit(c, 0.0) for c in dense]}, k=60)[:K]
            ]
            for bm25, dense in zip(keyword, hits)
        ]

    def run(shortlist: int) -> tuple[list[list[int]], list[float]]:
        matrix.search(vectors[0], k=K, collection_ids=None, shortlist=shortlist)  # warm
        hits, ms = [], []
        for vector in vectors:
            start = time.perf_counter()
            found = matrix.search(vector, k=K, collection_ids=None, shortlist=shortlist)
            ms.append((time.perf_counter() - start) * 1000)
            hits.append([h.chunk_id for h in found])
        return hits, ms

    def ndcg(hits: list[list[int]]) -> float:
        return round(
            metrics.mean(
                [
                    metrics.ndcg_at_k(metrics.dedupe([doc_of.get(c, f"x{c}") for c in ranked]), beir.qrels[q], 10)
                    for q, ranked in zip(names, hits)
                ]
            ),
            4,
        )

    exact, exact_ms = run(0)
    results = {
        "rows": len(matrix.ids),
        "real_rows": len(ids),
        "queries": len(names),
        "exact": {"ndcg@10": ndcg(exact), "hybrid_ndcg@10": ndcg(hybrid(exact)), **metrics.latency_summary(exact_ms)},
    }
    print(json.dumps({"exact": results["exact"]}), flush=True)
    for shortlist in (int(s) for s in args.shortlists.split(",")):
        hits, ms = run(shortlist)
        results[f"shortlist={shortlist}"] = {
            "top10_kept": round(metrics.mean([len(set(h[:10]) & set(e[:10])) / 10 for h, e in zip(hits, exact)]), 4),
            "top50_kept": round(metrics.mean([len(set(h) & set(e)) / K for h, e in zip(hits, exact)]), 4),
            "top10_identical": round(metrics.mean([h[:10] == e[:10] for h, e in zip(hits, exact)]), 4),
            "ndcg@10": ndcg(hits),
            "hybrid_ndcg@10": ndcg(hybrid(hits)),
            **metrics.latency_summary(ms),
        }
        print(json.dumps({f"shortlist={shortlist}": results[f"shortlist={shortlist}"]}), flush=True)
    results["machine"] = _common.machine_line()
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
