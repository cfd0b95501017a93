"""Embedding models compared on the same SciFact subset: dense nDCG@10 of whole abstracts, the
passage encode rate and the latency of embedding one question.

    /work/main/.venv/bin/python bench/embedder_compare.py [--queries 100] [--others 400] [--seed 0]
        [--models local/all-minilm-l6-v2,local/multilingual-e5-small] [--json out.json]

The subset: ``--queries`` judged queries (qrels/train.tsv, the dev split of this repository),
the documents they judge, and ``--others`` further abstracts drawn at random; the same for
every model. Each abstract (title + text) is one passage vector, each query one query vector
(``llm.embed(kind=...)``, so e5 gets its ``passage: `` / ``query: `` prefixes). Small enough
for a busy 2-core machine; nothing is cached, so each model's encode time is its own.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from pathlib import Path

import _common
import numpy as np

from core import llm
from foundry_site.evaluation.metrics import mean_interval, ndcg_at_k, recall_at_k, rounded

MODELS = "local/all-minilm-l6-v2,local/multilingual-e5-small"
LATENCY_QUERIES = 30


def subset(queries: int, others: int, seed: int) -> tuple[dict[str, str], dict[str, str], dict[str, dict[str, int]]]:
    """(documents id -> text, queries id -> text, qrels) of the sample."""
    corpus, judged, qrels = _common.scifact_files()
    rng = random.Random(seed)
    chosen = sorted(rng.sample(sorted(judged), min(queries, len(judged))))
    wanted = {doc for q in chosen for doc in qrels[q] if doc in corpus}
    pool = sorted(set(corpus) - wanted)
    wanted |= set(rng.sample(pool, min(others, len(pool))))
    docs = {d: f"{corpus[d].title} {corpus[d].text}".strip() for d in sorted(wanted)}
    return docs, {q: judged[q] for q in chosen}, {q: qrels[q] for q in chosen}


def measure(model: str, docs: dict[str, str], queries: dict[str, str], qrels: dict[str, dict[str, int]]) -> dict:
    llm.embed(["warm-up"], model=model)  # the model loads outside the timings
    start = time.perf_counter()
    matrix = np.asarray(llm.embed(list(docs.values()), model=model, kind="passage"), dtype=np.float32)
    encode_s = time.perf_counter() - start
    latencies = []
    for text in list(queries.values())[:LATENCY_QUERIES]:
        start = time.perf_counter()
        llm.embed([text], model=model, kind="query")
        latencies.append((time.perf_counter() - start) * 1000)
    qmatrix = np.asarray(llm.embed(list(queries.values()), model=model, kind="query"), dtype=np.float32)
    ids = list(docs)
    ndcg, recall, top1, unrelated = [], [], [], []
    for row, qid in zip(qmatrix @ matrix.T, queries):
        ranked = [ids[i] for i in np.argsort(-row)[:100]]
        ndcg.append(ndcg_at_k(ranked, qrels[qid]))
        recall.append(recall_at_k(ranked, qrels[qid], 100))
        top1.append(float(row.max()))
        judged = {ids.index(d) for d in qrels[qid] if d in docs}
        unrelated.append(float(np.median([s for i, s in enumerate(row) if i not in judged])))
    return {
        "model": model,
        "ndcg@10": round(statistics.fmean(ndcg), 4),
        "ndcg@10_95ci": rounded(mean_interval(ndcg)),
        "per_query_ndcg@10": [round(v, 4) for v in ndcg],
        "recall@100": round(statistics.fmean(recall), 4),
        "encode_s": round(encode_s, 1),
        "passages_per_s": round(len(docs) / encode_s, 2),
        "query_embed_ms": {
            "p50": round(statistics.median(latencies), 1),
            "p95": round(sorted(latencies)[int(0.95 * (len(latencies) - 1))], 1),
        },
        # The similarity scale: why thresholds are per model.
        "best_cosine_median": round(statistics.median(top1), 3),
        "unrelated_cosine_median": round(statistics.median(unrelated), 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--others", type=int, default=400)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--models", default=MODELS)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    docs, queries, qrels = subset(args.queries, args.others, args.seed)
    print(f"{len(queries)} queries, {len(docs)} abstracts; machine: {_common.machine_line()}", flush=True)
    rows = []
    for model in args.models.split(","):
        rows.append(measure(model, docs, queries, qrels))
        print(json.dumps({k: v for k, v in rows[-1].items() if k != "per_query_ndcg@10"}), flush=True)
    paired = {}
    for other in rows[1:]:
        diff = [b - a for a, b in zip(rows[0]["per_query_ndcg@10"], other["per_query_ndcg@10"])]
        paired[f"{other['model']} - {rows[0]['model']}"] = {
            "ndcg@10": round(statistics.fmean(diff), 4),
            "95ci": rounded(mean_interval(diff)),
        }
    print(json.dumps(paired), flush=True)
    result = {
        "command": "bench/embedder_compare.py "
        + f"--queries {args.queries} --others {args.others} --seed {args.seed} --models {args.models}",
        "date": time.strftime("%Y-%m-%d"),
        "machine": _common.machine_line(),
        "queries": len(queries),
        "abstracts": len(docs),
        "models": rows,
        "paired_difference": paired,
    }
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
