"""Gate thresholds (retrieval.min_score, retrieval.min_chunks) calibrated on SQuAD 2.0 dev,
retrieval only (no LLM call), every question of the file.

    /work/main/.venv/bin/python bench/gate_calibration.py [--squad FILE] [--kb-articles 5] [--seed 0]
        [--thresholds 0.10:0.60:0.025]   (another embedding model's scale, e.g. e5: 0.70:0.95:0.01)

The knowledge base is the one ``foundry eval answers`` builds for the same file,
article count and seed (cached under FOUNDRY_HOME/eval-cache). Each question runs
through the real ``retrieve()``; the cosine scores of the fused candidates before
the gate are kept, and every (min_score, min_chunks) pair is then replayed with
the real ``gate_decide``: refusal rate on out-of-corpus questions (should be 1),
pass rate on answerable in-corpus questions (should be 1), and on in-corpus
unanswerable ones (which only grounding can catch).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import _common  # noqa: F401  (Django set-up)
from django.conf import settings

from foundry_site.evaluation.answers import sample, squad_index
from foundry_site.evaluation.squad import load_squad
from retrieval.services.gate import gate_decide
from retrieval.services.retrieve import retrieve

THRESHOLDS = [round(0.10 + 0.025 * i, 3) for i in range(21)]  # 0.10 … 0.60


def scores_by_kind(squad: Path, kb_articles: int, seed: int, limit: int) -> dict[str, list[list[float]]]:
    articles = load_squad(squad)
    kb, _ = sample(articles, kb_articles=kb_articles, limit=3, seed=seed)
    kinds = {
        "answerable": [q for a in kb for q in a.questions if not q.impossible],
        "impossible": [q for a in kb for q in a.questions if q.impossible],
        "out_of_corpus": [q for a in articles if a not in kb for q in a.questions],
    }
    out: dict[str, list[list[float]]] = {}
    with squad_index(squad, kb):
        for kind, questions in kinds.items():
            out[kind] = []
            for q in questions[:limit]:
                found = retrieve(question=q.question, collection_ids=None)
                out[kind].append(sorted((c.score for c in found.ranked), reverse=True))
            print(f"  {kind}: {len(out[kind])} questions", flush=True)
    return out


def threshold_range(text: str) -> list[float]:
    """``low:high:step`` as the thresholds it names, both ends included."""
    low, high, step = (float(part) for part in text.split(":"))
    return [round(low + step * i, 4) for i in range(int(round((high - low) / step)) + 1)]


def sweep(scores: dict[str, list[list[float]]], thresholds: list[float] = THRESHOLDS) -> list[dict]:
    rows = []
    for min_chunks in (1, 2, 3):
        for min_score in thresholds:
            row = {"min_score": min_score, "min_chunks": min_chunks}
            for kind, lists in scores.items():
                passed = sum(gate_decide(s, min_score=min_score, min_chunks=min_chunks).passed for s in lists)
                row[f"pass_{kind}"] = round(passed / len(lists), 4) if lists else None
            rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--squad", type=Path, default=_common.DEFAULT_DATA.parent / "squad2" / "dev.json")
    parser.add_argument("--kb-articles", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--limit", type=int, default=100000, help="questions per kind at most")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--thresholds", type=threshold_range, default=THRESHOLDS, help="low:high:step")
    args = parser.parse_args()
    start = time.perf_counter()
    scores = scores_by_kind(args.squad, args.kb_articles, args.seed, args.limit)
    rows = sweep(scores, args.thresholds)
    conf = settings.FOUNDRY.retrieval
    print(
        f"machine: {_common.machine_line()}; {time.perf_counter() - start:.0f} s; current gate "
        f"min_score={conf.min_score} min_chunks={conf.min_chunks}"
    )
    print("min_chunks min_score  refused(out of corpus)  passed(answerable)  passed(unanswerable in corpus)")
    for r in rows:
        print(
            f"  {r['min_chunks']:>3}      {r['min_score']:.3f}      {1 - r['pass_out_of_corpus']:.3f}"
            f"                 {r['pass_answerable']:.3f}               {r['pass_impossible']:.3f}"
        )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "embedding_model": settings.FOUNDRY.embedding.model,
                    "rows": rows,
                    "scores": scores,
                    "machine": _common.machine_line(),
                }
            )
        )


if __name__ == "__main__":
    main()
