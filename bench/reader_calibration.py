"""Extractive reader weights and thresholds, calibrated on SQuAD 2.0 dev questions that
``foundry eval answers`` does not ask (its sampled questions are left out, so the eval stays a test).

    /work/main/.venv/bin/python bench/reader_calibration.py [--squad FILE] [--kb-articles 5] [--seed 0]
        [--limit 400] [--json out.json] [--gates 0.3,0.325,0.35,0.375,0.4] [--thresholds 0.40:1.10:0.025]
    (another embedding model's scale, e.g. e5: --gates 0.80,0.82,0.84,0.86 --thresholds 0.80:1.40:0.025)

Each question runs through the real ``retrieve()`` (gate included); for the passages the reader
would get, every unit's features are kept: cosine to the question, lexical overlap, its
neighbours' overlap, the passage's rank, and whether the unit holds a gold answer (normalised
as the official scorer does). Then:
1. weights: for each (lexical, neighbour, rank) weight triple, the share of answerable questions
   whose best unit holds a gold answer, on a tuning half and on the held-out half;
2. thresholds: with the shipped weights, for each threshold on the best unit's score, the
   share of answerable questions still answered (and holding the answer) against the share
   of in-corpus unanswerable questions answered.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

import _common  # noqa: F401  (Django set-up)
from django.conf import settings
from django.test.utils import override_settings

from gate_calibration import threshold_range

from foundry_site.evaluation.answers import sample, squad_index
from foundry_site.evaluation.squad import load_squad, normalize_answer
from generation import reader
from generation.reader.weights import weights_for
from core.grounding import content_words
from generation.reader import Passage
from retrieval.services.retrieve import retrieve

LEXICAL = (0.0, 0.15, 0.25, 0.35, 0.5, 0.75, 1.0)
NOVELTY = (0.0, 0.1, 0.2, 0.3, 0.5)
NEIGHBOUR = (0.0, 0.1)
RANK = (0.0, 0.05)
THRESHOLDS = [round(0.40 + 0.025 * i, 3) for i in range(29)]  # 0.40 … 1.10
MARGINS = (0.0, 0.04, 0.08, 0.12)


GATE_FLOOR = 0.2  # features are taken with the gate this low, so the gate can be replayed above it
GATES = (0.3, 0.325, 0.35, 0.375, 0.4)


def features(question: str, golds: list[str]) -> dict | None:
    with override_settings(FOUNDRY=settings.FOUNDRY.with_overrides(retrieval={"min_score": GATE_FLOOR})):
        found = retrieve(question=question, collection_ids=None)
    if not found.gate.passed or not found.candidates:
        return None
    conf = settings.FOUNDRY.generation
    chosen = found.candidates[: conf.max_passages]
    pscore = {c.label: round(c.score, 4) for c in chosen}
    passages = [
        Passage(c.label, c.chunk.text, c.chunk.line_start, c.chunk.line_end, rank=i, under=c.chunk.under)
        for i, c in enumerate(chosen, start=1)
    ]
    quotes = reader.units_score(question, passages, embedding_model=settings.FOUNDRY.embedding.model)
    norm = [normalize_answer(g) for g in golds if normalize_answer(g)]
    asked = content_words(question)
    by_unit = {(q.passage.label, q.unit.start): q for q in quotes}
    rows = []
    for q in quotes:
        neighbours = [by_unit.get((q.passage.label, s)) for s in _neighbour_starts(q, quotes)]
        words = content_words(q.unit.scored_text)
        rows.append(
            {
                "cos": round(q.cosine, 5),
                "lex": round(q.lexical, 4),
                "pscore": pscore[q.passage.label],
                "novel": round(len(words - asked) / len(words), 4) if words else 0.0,
                "nb": round(max((n.lexical for n in neighbours if n), default=0.0), 4),
                "rank": q.passage.rank,
                "gold": any(g in normalize_answer(q.unit.text) for g in norm),
            }
        )
    return {"units": rows, "passage_gold": any(g in normalize_answer(p.text) for p in passages for g in norm)}


def _neighbour_starts(quote: reader.Quote, quotes: list[reader.Quote]) -> list[int]:
    starts = sorted(q.unit.start for q in quotes if q.passage.label == quote.passage.label)
    i = starts.index(quote.unit.start)
    return [starts[j] for j in (i - 1, i + 1) if 0 <= j < len(starts)]


def score(row: dict, lex: float, nb: float, rank: float, novel: float = 0.0) -> float:
    return row["cos"] + lex * row["lex"] + nb * row["nb"] + rank / row["rank"] + novel * row.get("novel", 0.0)


def top_hit(item: dict, weights: tuple[float, ...]) -> bool:
    best = max(item["units"], key=lambda r: score(r, *weights))
    return best["gold"]


def weight_sweep(answerable: list[dict], seed: int) -> list[dict]:
    rng = random.Random(seed)
    order = list(range(len(answerable)))
    rng.shuffle(order)
    half = len(order) // 2
    tune, held = [answerable[i] for i in order[:half]], [answerable[i] for i in order[half:]]
    rows = []
    for lex in LEXICAL:
        for nb in NEIGHBOUR:
            for rank in RANK:
                for novel in NOVELTY:
                    w = (lex, nb, rank, novel)
                    rows.append(
                        {
                            "lexical": lex,
                            "neighbour": nb,
                            "rank": rank,
                            "novelty": novel,
                            "top1_tune": round(sum(top_hit(x, w) for x in tune) / len(tune), 4),
                            "top1_held": round(sum(top_hit(x, w) for x in held) / len(held), 4),
                        }
                    )
    return sorted(rows, key=lambda r: -r["top1_tune"])


def quoted_hit(item: dict, weights: tuple[float, ...], margin: float, max_units: int) -> bool:
    """Whether the units the reader would quote (best, then those within ``margin``) hold a gold answer."""
    ranked = sorted(item["units"], key=lambda r: -score(r, *weights))
    best = score(ranked[0], *weights)
    return any(r["gold"] for r in ranked[:max_units] if score(r, *weights) >= best - margin)


def threshold_curve(
    data: dict[str, list[dict | None]],
    weights: tuple[float, ...],
    max_units: int,
    gates: tuple[float, ...] = GATES,
    thresholds: list[float] = THRESHOLDS,
) -> list[dict]:
    """Gate (min_score) x reader threshold x quoting margin, replayed on the features: a question is
    answered when a passage reaches the gate and the best unit of the passages that do reaches the threshold."""
    rows = []
    for gate in gates:
        for margin in MARGINS:
            for t in thresholds:
                row: dict = {"gate": gate, "margin": margin, "threshold": t}
                for kind, items in data.items():
                    kept = [_above_gate(x, gate) for x in items]
                    answered = [x for x in kept if x and max(score(r, *weights) for r in x["units"]) >= t]
                    row[f"answered_{kind}"] = round(len(answered) / len(items), 4) if items else None
                    if kind == "answerable":
                        row["holds_gold"] = round(
                            sum(quoted_hit(x, weights, margin, max_units) for x in answered) / len(items), 4
                        )
                rows.append(row)
    return rows


def _above_gate(item: dict | None, gate: float) -> dict | None:
    units = [r for r in item["units"] if r["pscore"] >= gate] if item else []
    return {**item, "units": units} if units else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--squad", type=Path, default=_common.DEFAULT_DATA.parent / "squad2" / "dev.json")
    parser.add_argument("--kb-articles", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--eval-limit", type=int, default=300, help="the eval's --limit whose questions are left out")
    parser.add_argument("--limit", type=int, default=400, help="calibration questions per kind at most")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--features", type=Path, default=None, help="also write every unit's features here")
    parser.add_argument("--gates", type=lambda t: tuple(float(g) for g in t.split(",")), default=GATES)
    parser.add_argument("--thresholds", type=threshold_range, default=THRESHOLDS, help="low:high:step")
    args = parser.parse_args()
    start = time.perf_counter()
    articles = load_squad(args.squad)
    kb, asked = sample(articles, kb_articles=args.kb_articles, limit=args.eval_limit, seed=args.seed)
    left_out = {q.qid for qs in asked.values() for q in qs}
    pools = {
        "answerable": [q for a in kb for q in a.questions if not q.impossible and q.qid not in left_out],
        "impossible": [q for a in kb for q in a.questions if q.impossible and q.qid not in left_out],
        "out_of_corpus": [q for a in articles if a not in kb for q in a.questions if q.qid not in left_out],
    }
    rng = random.Random(args.seed + 1)
    data: dict[str, list[dict | None]] = {}
    with squad_index(args.squad, kb):
        for kind, pool in pools.items():
            chosen = rng.sample(pool, min(args.limit, len(pool)))
            data[kind] = [features(q.question, list(q.answers)) for q in chosen]
            print(f"  {kind}: {len(chosen)} questions", flush=True)
    if args.features:
        args.features.write_text(json.dumps(data))
    answerable = [x for x in (_above_gate(x, settings.FOUNDRY.retrieval.min_score) for x in data["answerable"]) if x]
    weights = weight_sweep(answerable, args.seed)
    # the reader's own score: cosine + lexical (generation/data/scoring.json)
    shipped = (weights_for(settings.FOUNDRY.embedding.model).lexical, 0.0, 0.0, 0.0)
    curve = threshold_curve(data, shipped, settings.FOUNDRY.generation.reader_max_units, args.gates, args.thresholds)
    passed = len(answerable) / len(data["answerable"])  # at the configured gate
    in_passages = sum(x["passage_gold"] for x in answerable) / len(data["answerable"])
    print(f"machine: {_common.machine_line()}; {time.perf_counter() - start:.0f} s")
    print(f"answerable: gate passed {passed:.3f}; a passage holds a gold answer {in_passages:.3f}")
    print("lexical neighbour rank novelty  top1(tune) top1(held-out)")
    for r in weights[:15]:
        print(
            f"  {r['lexical']:.2f}    {r['neighbour']:.2f}    {r['rank']:.2f}   {r['novelty']:.2f}   "
            f"{r['top1_tune']:.3f}     {r['top1_held']:.3f}"
        )
    print(
        f"weights {shipped}; gate margin threshold  answered(answerable)  holds gold  "
        "answered(unanswerable in corpus)  answered(out of corpus)"
    )
    for r in curve:
        print(
            f"  {r['gate']:.3f} {r['margin']:.2f}  {r['threshold']:.3f}     "
            f"{r['answered_answerable']:.3f}              {r['holds_gold']:.3f}       "
            f"{r['answered_impossible']:.3f}       {r['answered_out_of_corpus']:.3f}"
        )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "embedding_model": settings.FOUNDRY.embedding.model,
                    "weights": weights,
                    "thresholds": curve,
                    "gate_passed": passed,
                    "passage_holds_gold": in_passages,
                    "machine": _common.machine_line(),
                    "questions": {k: len(v) for k, v in data.items()},
                },
                indent=1,
            )
        )


if __name__ == "__main__":
    main()
