"""SciFact side by side, one run, same machine, same data, same MiniLM vectors:
Foundry's bm25 / dense / hybrid (the real ``retrieve()``), rank_bm25 (BM25Okapi over
title + text), Chroma fed Foundry's own chunk vectors (HNSW, cosine) and an exact
numpy scan of the same vectors.

    /work/main/.venv/bin/pip install -r requirements/bench.txt -c requirements/lock.txt
    /work/main/.venv/bin/python bench/retrieval_peers.py [--data /work/shared/eval/scifact] [--json out.json]

Documents rank where their best chunk ranks (as in ``foundry eval retrieval``).
Latency per query includes embedding the query for every dense system.
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import _common  # noqa: F401  (Django set-up)
import numpy as np
from django.conf import settings
from django.db import connection

from core import llm
from foundry_site.evaluation import metrics
from foundry_site.evaluation.retrieval_run import METRIC_KEYS, mode_evaluate
from sources import vectorstore

_TOKEN = re.compile(r"\w+")


def chunk_vectors() -> tuple[np.ndarray, np.ndarray]:
    with connection.cursor() as cur:
        cur.execute(f"SELECT chunk_id, embedding FROM {vectorstore.table_name(settings.FOUNDRY.embedding.model)}")
        rows = cur.fetchall()
    ids = np.array([r[0] for r in rows], dtype=np.int64)
    return ids, np.vstack([np.frombuffer(r[1], dtype=np.float32) for r in rows])


def score(name: str, search: Callable[[str], list[str]], beir: _common.Beir) -> dict:
    per_query, latencies = [], []
    search(next(iter(beir.queries.values())))  # warm-up
    for qid, text in beir.queries.items():
        start = time.perf_counter()
        ranked = search(text)
        latencies.append((time.perf_counter() - start) * 1000)
        per_query.append(metrics.ranking_metrics(metrics.dedupe(ranked), beir.qrels[qid]))
    out = {k: round(metrics.mean([m[k] for m in per_query]), 4) for k in METRIC_KEYS}
    print(
        f"  {name:<22} nDCG@10 {out['ndcg@10']:.4f}  R@100 {out['recall@100']:.4f}  "
        f"P50 {metrics.percentile(latencies, 50):7.1f} ms  P95 {metrics.percentile(latencies, 95):7.1f} ms",
        flush=True,
    )
    return {**out, **metrics.latency_summary(latencies)}


def embed_query(text: str) -> np.ndarray:
    return np.asarray(llm.embed([text], model=settings.FOUNDRY.embedding.model)[0], dtype=np.float32)


def rank_bm25_search(beir: _common.Beir) -> Callable[[str], list[str]]:
    from rank_bm25 import BM25Okapi

    doc_ids = list(beir.corpus)
    bm25 = BM25Okapi([_TOKEN.findall(f"{d.title} {d.text}".lower()) for d in beir.corpus.values()])

    def search(text: str) -> list[str]:
        scores = bm25.get_scores(_TOKEN.findall(text.lower()))
        top = np.argpartition(-scores, 100)[:100]
        return [doc_ids[i] for i in top[np.argsort(-scores[top])]]

    return search


def numpy_search(ids: np.ndarray, vectors: np.ndarray, doc_of: dict[int, str]) -> Callable[[str], list[str]]:
    def search(text: str) -> list[str]:
        sims = vectors @ embed_query(text)
        top = np.argpartition(-sims, 100)[:100]
        return [doc_of[int(ids[i])] for i in top[np.argsort(-sims[top])]]

    return search


def chroma_search(ids: np.ndarray, vectors: np.ndarray, doc_of: dict[int, str]) -> Callable[[str], list[str]]:
    import chromadb
    from chromadb.config import Settings

    client = chromadb.PersistentClient(
        path=tempfile.mkdtemp(prefix="chroma-bench-"), settings=Settings(anonymized_telemetry=False)
    )
    collection = client.create_collection("scifact", metadata={"hnsw:space": "cosine"})
    step = 4000
    for start in range(0, len(ids), step):
        collection.add(
            ids=[str(i) for i in ids[start : start + step]], embeddings=vectors[start : start + step].tolist()
        )

    def search(text: str) -> list[str]:
        found = collection.query(query_embeddings=[embed_query(text).tolist()], n_results=100, include=[])
        return [doc_of[int(i)] for i in found["ids"][0]]

    return search


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=_common.DEFAULT_DATA)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    results: dict[str, dict] = {}
    with _common.scifact(args.data) as beir:
        print(
            f"SciFact: {len(beir.corpus)} documents, {len(beir.index.doc_of_chunk)} chunks, "
            f"{len(beir.queries)} queries\nmachine: {_common.machine_line()}",
            flush=True,
        )
        for mode in ("bm25", "dense", "hybrid"):
            summary = mode_evaluate(mode, beir.queries, beir.qrels, beir.index, None).summary()
            results[f"foundry {mode}"] = summary
            print(
                f"  {'foundry ' + mode:<22} nDCG@10 {summary['ndcg@10']:.4f}  R@100 {summary['recall@100']:.4f}  "
                f"P50 {summary['p50_ms']:7.1f} ms  P95 {summary['p95_ms']:7.1f} ms",
                flush=True,
            )
        ids, vectors = chunk_vectors()
        doc_of = beir.index.doc_of_chunk
        results["rank_bm25 (BM25Okapi)"] = score("rank_bm25 (BM25Okapi)", rank_bm25_search(beir), beir)
        results["numpy exact dense"] = score("numpy exact dense", numpy_search(ids, vectors, doc_of), beir)
        results["chroma (HNSW)"] = score("chroma (HNSW)", chroma_search(ids, vectors, doc_of), beir)
    results["_machine"] = {"line": _common.machine_line()}
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
