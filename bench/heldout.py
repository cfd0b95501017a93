"""Fusion settings chosen on some claims, scored on claims they were not chosen on: an estimate,
from the dev data alone, of what tuning on the train claims is worth on an unseen split.

    /work/main/.venv/bin/python bench/heldout.py [--data DIR] [--top-k 100] [--splits 500] [--seed 0]
        [--convex] [--json out.json]

Every train claim is searched once through the product's own ``retrieve()`` in hybrid mode (as
``foundry eval retrieval`` does, ``--top-k`` 100 by default: channel depth 500), and its two
channels are fused under every setting the configuration offers: ``retrieval.fusion`` chunk or
document × ``retrieval.rrf_k`` in K (``--convex`` adds min-max score fusion, which the product
does not offer). Per claim, nDCG@10 over documents for each setting.

Then, ``--splits`` times, the claims are halved at random: the setting with the best mean on one
half (the "tuning" half) is scored on the other (the "unseen" half), beside the shipped default
on that same half. The mean of those held-out scores is what "pick the best setting on train"
delivers on claims it did not see; the gap to its tuning-half score is the optimism of a
number picked and reported on the same claims. A paired bootstrap over all claims gives each
setting's difference to the default with a 95 % interval.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path

import _common
import numpy as np
from django.conf import settings

from foundry_site.evaluation import metrics
from retrieval.fusion import Hit, document_rank_fusion, reciprocal_rank_fusion
from retrieval.services.retrieve import CANDIDATE_FACTOR, retrieve
from sources.models import Chunk

K = (60, 30, 10, 5, 3, 1)
ALPHAS = (0.3, 0.4, 0.5, 0.6, 0.7)  # --convex: BM25's share
Channels = dict[str, list[Hit]]


def convex_fusion(channels: dict[str, list[Hit]], alpha: float) -> list[Hit]:
    """Score fusion: alpha · minmax(BM25) + (1 − alpha) · minmax(cosine), each over the channel's hits
    (a chunk missing from a channel gets 0 there). Not in the product: measured beside RRF."""
    scores: dict[int, float] = {}
    for name, weight in (("bm25", alpha), ("dense", 1 - alpha)):
        hits = channels.get(name, [])
        if not hits:
            continue
        low, high = min(h.score for h in hits), max(h.score for h in hits)
        for h in hits:
            scaled = (h.score - low) / (high - low) if high > low else 1.0
            scores[h.chunk_id] = scores.get(h.chunk_id, 0.0) + weight * scaled
    return [Hit(cid, v) for cid, v in sorted(scores.items(), key=lambda item: (-item[1], item[0]))]


def fusers(source_of: dict[int, int], convex: bool) -> dict[str, Callable[[Channels], list[Hit]]]:
    """Every setting the configuration offers (``retrieval.fusion`` × ``retrieval.rrf_k``), and with
    ``convex`` score fusion at each of ALPHAS, by name."""
    out: dict[str, Callable[[Channels], list[Hit]]] = {}
    for k in K:
        out[f"chunk k={k}"] = lambda channels, k=k: reciprocal_rank_fusion(channels, k=k)
    for k in K:
        out[f"document k={k}"] = lambda channels, k=k: document_rank_fusion(channels, source_of=source_of, k=k)
    if convex:
        for alpha in ALPHAS:
            out[f"convex bm25={alpha}"] = lambda channels, alpha=alpha: convex_fusion(channels, alpha)
    return out


def per_claim(
    beir: _common.Beir,
    top_k: int,
    grid: dict[str, Callable[[Channels], list[Hit]]],
    extra: dict[str, Callable[[str, int], list[Hit]]] | None = None,
) -> tuple[list[str], dict[str, np.ndarray], dict[str, list[float]]]:
    """nDCG@10 of every claim under every setting of ``grid`` (name: fuse the channels), from one
    search per claim. ``extra`` channels (name: search(claim, depth)) join the two searched ones
    at their depth, each timed: (claims, scores, ms per claim of each extra channel)."""
    doc_of = beir.index.doc_of_chunk
    depth = max(top_k * CANDIDATE_FACTOR, 50)
    claims = list(beir.queries)
    scores = {name: np.zeros(len(claims)) for name in grid}
    extra_ms: dict[str, list[float]] = {name: [] for name in extra or {}}
    start = time.perf_counter()
    for i, claim in enumerate(claims):
        text = beir.queries[claim]
        channels = retrieve(question=text, collection_ids=None, mode="hybrid", top_k=top_k).channels
        for name, search in (extra or {}).items():
            began = time.perf_counter()
            channels[name] = search(text, depth)
            extra_ms[name].append((time.perf_counter() - began) * 1000)
        for name, fuse in grid.items():
            ranked = metrics.dedupe([doc_of[h.chunk_id] for h in fuse(channels)[:top_k]])
            scores[name][i] = metrics.ndcg_at_k(ranked, beir.qrels[claim], 10)
        if (i + 1) % 200 == 0:
            print(f"{i + 1} claims searched ({time.perf_counter() - start:.0f} s)", flush=True)
    return claims, scores, extra_ms


def halving(
    scores: dict[str, np.ndarray],
    default: str,
    splits: int,
    rng: np.random.Generator,
    baseline: Callable[[str], bool] | None = None,
) -> dict:
    """Pick the best setting on a random half, score it on the other half; ``splits`` times.

    With ``baseline``, the gain is also taken against the best of the settings it accepts, picked on
    the same tuning half: what the other settings add to tuning those alone.
    """
    grid = list(scores)
    table = np.stack([scores[s] for s in grid])  # settings × claims
    n = table.shape[1]
    accepted = np.array([baseline(name) for name in grid]) if baseline else None
    tuned, unseen, default_unseen, baseline_unseen, picked = [], [], [], [], []
    for _ in range(splits):
        order = rng.permutation(n)
        a, b = order[: n // 2], order[n // 2 :]
        means = table[:, a].mean(axis=1)
        best = int(np.argmax(means))
        tuned.append(table[best, a].mean())
        unseen.append(table[best, b].mean())
        default_unseen.append(scores[default][b].mean())
        if accepted is not None:
            baseline_unseen.append(table[int(np.argmax(np.where(accepted, means, -np.inf))), b].mean())
        picked.append(grid[best])
    counts: dict[str, int] = {}
    for name in picked:
        counts[name] = counts.get(name, 0) + 1
    out = {
        "splits": splits,
        "picked_on_tuning_half": round(float(np.mean(tuned)), 4),
        "picked_on_unseen_half": round(float(np.mean(unseen)), 4),
        "default_on_unseen_half": round(float(np.mean(default_unseen)), 4),
        "gain_over_default_on_unseen_half": _spread(np.array(unseen) - np.array(default_unseen)),
    }
    if accepted is not None:
        out["baseline_on_unseen_half"] = round(float(np.mean(baseline_unseen)), 4)
        out["gain_over_baseline_on_unseen_half"] = _spread(np.array(unseen) - np.array(baseline_unseen))
    out["times_picked"] = dict(sorted(counts.items(), key=lambda item: -item[1]))
    return out


def _spread(gain: np.ndarray) -> dict:
    return {
        "mean": round(float(gain.mean()), 4),
        "p05": round(float(np.percentile(gain, 5)), 4),
        "p95": round(float(np.percentile(gain, 95)), 4),
        "share_positive": round(float(np.mean(gain > 0)), 3),
    }


def bootstrap(scores: dict[str, np.ndarray], default: str, rounds: int, rng: np.random.Generator) -> dict:
    """Each setting's mean and its difference to the default, with a paired 95 % bootstrap interval."""
    n = scores[default].size
    samples = rng.integers(0, n, size=(rounds, n))
    out = {}
    for name, values in scores.items():
        diff = values - scores[default]
        means = diff[samples].mean(axis=1)
        out[name] = {
            "ndcg@10": round(float(values.mean()), 4),
            "minus_default": round(float(diff.mean()), 4),
            "ci95": [round(float(np.percentile(means, 2.5)), 4), round(float(np.percentile(means, 97.5)), 4)],
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=_common.DEFAULT_DATA)
    parser.add_argument("--top-k", type=int, default=100)
    parser.add_argument("--splits", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--convex", action="store_true", help="also score fusion (not in the product)")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    conf = settings.FOUNDRY.retrieval
    default = f"{conf.fusion} k={conf.rrf_k}"
    results: dict = {
        "machine": _common.machine_line(),
        "top_k": args.top_k,
        "default": default,
        "window_sentences": settings.FOUNDRY.ingest.window_sentences,
    }
    with _common.scifact(args.data) as beir:
        grid = fusers(dict(Chunk.objects.values_list("pk", "source_id")), args.convex)
        claims, scores, _ = per_claim(beir, args.top_k, grid)
    if default not in scores:
        parser.error(f"the configured default ({default}) is not in the grid K={K}")
    rng = np.random.default_rng(args.seed)
    results["claims"] = len(claims)
    results["settings"] = bootstrap(scores, default, 2000, rng)
    results["halving"] = halving(scores, default, args.splits, rng)
    print(json.dumps(results, indent=2))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
