"""Ranking metrics against values computed by hand (trec_eval conventions)."""

from __future__ import annotations

import math

import pytest

from foundry_site.evaluation import metrics


def test_ndcg_binary_relevance() -> None:
    # DCG = 1/log2(2) + 1/log2(4) = 1.5; IDCG (3 relevant) = 1 + 1/log2(3) + 1/log2(4) = 2.1309
    value = metrics.ndcg_at_k(["a", "x", "b"], {"a": 1, "b": 1, "c": 1}, 10)
    assert value == pytest.approx(1.5 / (1.5 + 1 / math.log2(3)), abs=1e-9)
    assert value == pytest.approx(0.70392, abs=1e-5)


def test_ndcg_graded_relevance_uses_linear_gain() -> None:
    # DCG = 1/1 + 2/log2(3) = 2.26186; IDCG = 2/1 + 1/log2(3) = 2.63093
    assert metrics.ndcg_at_k(["b", "a"], {"a": 2, "b": 1}, 10) == pytest.approx(0.85972, abs=1e-5)
    assert metrics.ndcg_at_k(["a", "b"], {"a": 2, "b": 1}, 10) == pytest.approx(1.0)


def test_ndcg_cut_off_and_zero_grades() -> None:
    assert metrics.ndcg_at_k(["x", "a"], {"a": 1}, 1) == 0.0
    # a judged 0 is not relevant: only b (rank 2) counts, IDCG = 1
    assert metrics.ndcg_at_k(["a", "b"], {"a": 0, "b": 1}, 10) == pytest.approx(1 / math.log2(3))
    assert metrics.ndcg_at_k(["a"], {"a": 0}, 10) == 0.0


def test_mrr() -> None:
    assert metrics.mrr_at_k(["x", "y", "a"], {"a": 1}, 10) == pytest.approx(1 / 3)
    assert metrics.mrr_at_k(["x", "y", "a"], {"a": 1}, 2) == 0.0
    assert metrics.mrr_at_k(["a", "b"], {"a": 0, "b": 2}, 10) == 0.5


def test_recall() -> None:
    ranked, qrels = ["a", "x", "b"], {"a": 1, "b": 1, "c": 1}
    assert metrics.recall_at_k(ranked, qrels, 2) == pytest.approx(1 / 3)
    assert metrics.recall_at_k(ranked, qrels, 10) == pytest.approx(2 / 3)
    assert metrics.recall_at_k(ranked, {"a": 0}, 10) == 0.0


def test_dedupe_keeps_best_rank_of_each_document() -> None:
    assert metrics.dedupe(["d1", "d2", "d1", "d3", "d2"]) == ["d1", "d2", "d3"]


def test_percentiles_interpolate_like_numpy() -> None:
    assert metrics.percentile([4, 1, 3, 2], 50) == 2.5
    assert metrics.percentile([1, 2, 3, 4], 95) == pytest.approx(3.85)
    assert metrics.percentile([], 95) == 0.0
    assert metrics.latency_summary([10.0]) == {"p50_ms": 10.0, "p95_ms": 10.0}


def test_mean_interval_by_hand() -> None:
    # Resampling [0, 1] gives means 0, 0.5, 1 with chances 1/4, 1/2, 1/4: the 95 % interval is [0, 1].
    assert metrics.mean_interval([0.0, 1.0]) == (0.0, 1.0)
    # 50 zeros and 50 ones: mean 0.5, standard error 0.05, so about 0.5 ± 1.96 · 0.05.
    low, high = metrics.mean_interval([0.0] * 50 + [1.0] * 50)
    assert low == pytest.approx(0.402, abs=0.02) and high == pytest.approx(0.598, abs=0.02)
    assert metrics.mean_interval([0.7] * 5) == (0.7, 0.7)
    assert metrics.mean_interval([0.7]) is None and metrics.mean_interval([]) is None


def test_mean_interval_is_seeded_and_paired_differences_can_exclude_zero() -> None:
    gaps = [0.01 * (i % 7) for i in range(30)]  # one system never worse, query by query
    assert metrics.mean_interval(gaps) == metrics.mean_interval(gaps)
    low, high = metrics.mean_interval(gaps)
    assert 0 < low < sum(gaps) / len(gaps) < high
    assert metrics.mean_interval(gaps, seed=1) != metrics.mean_interval(gaps, seed=2)


def test_proportion_interval_is_wilson() -> None:
    # 0 of 30: the upper end is z² / (n + z²) = 3.8416 / 33.8416;
    # 15 of 30: 0.5 ± 1.96 · √(0.25/30 + z²/3600) / (1 + z²/30).
    low, high = metrics.proportion_interval(0, 30)
    assert low == 0.0 and high == pytest.approx(3.8416 / 33.8416, abs=1e-4)
    low, high = metrics.proportion_interval(15, 30)
    assert low == pytest.approx(0.3315, abs=1e-4) and high == pytest.approx(0.6685, abs=1e-4)
    assert metrics.proportion_interval(30, 30)[1] == 1.0
    assert metrics.proportion_interval(0, 0) is None
