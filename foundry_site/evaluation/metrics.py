"""Ranking and latency metrics as pure functions (no database, no Django).

Conventions follow trec_eval / pytrec_eval, which BEIR uses: gain is the graded
relevance itself (not 2^rel - 1), the discount is log2(rank + 1), the ideal DCG
is taken over every judged relevant document, and a document judged 0 (or lower)
is not relevant.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

Qrels = Mapping[str, int]  # document id -> graded relevance, for one query


def dedupe(ranked: Sequence[str]) -> list[str]:
    """First occurrence of each id, in order (a document ranks where its best chunk ranks)."""
    return list(dict.fromkeys(ranked))


def dcg_at_k(ranked: Sequence[str], qrels: Qrels, k: int) -> float:
    return sum(max(qrels.get(doc, 0), 0) / math.log2(rank + 1) for rank, doc in enumerate(ranked[:k], start=1))


def ndcg_at_k(ranked: Sequence[str], qrels: Qrels, k: int = 10) -> float:
    """nDCG@k with graded relevance; 0.0 when the query has no relevant document."""
    ideal = sorted((g for g in qrels.values() if g > 0), reverse=True)[:k]
    idcg = sum(g / math.log2(rank + 1) for rank, g in enumerate(ideal, start=1))
    return dcg_at_k(ranked, qrels, k) / idcg if idcg else 0.0


def recall_at_k(ranked: Sequence[str], qrels: Qrels, k: int) -> float:
    """Share of the relevant documents found in the first ``k``."""
    relevant = {doc for doc, g in qrels.items() if g > 0}
    if not relevant:
        return 0.0
    return len(relevant.intersection(ranked[:k])) / len(relevant)


def mrr_at_k(ranked: Sequence[str], qrels: Qrels, k: int = 10) -> float:
    """1 / rank of the first relevant document within ``k``; 0.0 if none."""
    for rank, doc in enumerate(ranked[:k], start=1):
        if qrels.get(doc, 0) > 0:
            return 1.0 / rank
    return 0.0


def ranking_metrics(ranked: Sequence[str], qrels: Qrels) -> dict[str, float]:
    """The four numbers ``foundry eval retrieval`` reports for one query."""
    return {
        "ndcg@10": ndcg_at_k(ranked, qrels, 10),
        "recall@10": recall_at_k(ranked, qrels, 10),
        "recall@100": recall_at_k(ranked, qrels, 100),
        "mrr@10": mrr_at_k(ranked, qrels, 10),
    }


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def mean_interval(
    values: Sequence[float], *, confidence: float = 0.95, resamples: int = 2000, seed: int = 0
) -> tuple[float, float] | None:
    """Percentile-bootstrap interval of the mean of per-query ``values`` (for two systems on the same
    queries, pass the per-query differences: a paired interval). None under two values. Seeded, so a
    report's interval is reproducible."""
    if len(values) < 2:
        return None
    from scipy import stats  # imported here: every `foundry` command loads this module, few need scipy

    found = stats.bootstrap(
        (np.asarray(values, dtype=float),),
        np.mean,
        confidence_level=confidence,
        n_resamples=resamples,
        method="percentile",
        rng=np.random.default_rng(seed),
    )
    return float(found.confidence_interval.low), float(found.confidence_interval.high)


def proportion_interval(hits: int, total: int, *, confidence: float = 0.95) -> tuple[float, float] | None:
    """Wilson score interval of a rate ``hits / total`` (sound near 0 and 1, where a bootstrap of a
    few dozen 0/1 values collapses to a point); None for no trials."""
    if not total:
        return None
    from scipy import stats

    found = stats.binomtest(hits, total).proportion_ci(confidence_level=confidence, method="wilson")
    return float(found.low), float(found.high)


def rounded(interval: tuple[float, float] | None, scale: float = 1.0) -> list[float] | None:
    """An interval as a report stores it: ``[low, high]`` times ``scale``, to 4 places; None stays None."""
    return [round(scale * interval[0], 4), round(scale * interval[1], 4)] if interval else None


def span(interval: list[float] | None) -> str:
    """An interval as a table shows it."""
    return f"{interval[0]:.4f} – {interval[1]:.4f}" if interval else "–"


def percentile(values: Sequence[float], p: float) -> float:
    """Linear-interpolated percentile (numpy's default method); 0.0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    position = (len(ordered) - 1) * p / 100.0
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def latency_summary(values_ms: Sequence[float]) -> dict[str, float]:
    return {"p50_ms": round(percentile(values_ms, 50), 1), "p95_ms": round(percentile(values_ms, 95), 1)}
