"""Which vectors should find a chunk? Measured on the product's own SciFact eval index, built
with sentence windows (``ingest.window_sentences``), so nothing is embedded here.

    /work/main/.venv/bin/python bench/window_units.py [--data DIR] [--json out.json]

From the product's dense matrix (every chunk vector and window vector of the index), three
dense channels, each a chunk scored by the best of its rows (``retrieval.dense_matrix.DenseMatrix``):
``chunks`` (chunk vectors only: the product before windows), ``windows`` (window vectors only;
a chunk without windows keeps its own vector) and ``chunks+windows`` (every row: what ships).
Each is measured alone and fused with the product's BM25 channel (hybrid mode, depth 50 as
shipped) by Foundry's own fusion functions: chunk RRF at k = 60 (the default), 10, 1, and
document RRF at k = 3. nDCG@10 over documents, train claims (dev data only).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import _common
import numpy as np
from django.conf import settings
from retrieval_sweep import ndcg

from core import llm
from retrieval import dense, dense_matrix
from retrieval.fusion import document_rank_fusion, reciprocal_rank_fusion
from retrieval.models import ChunkSearch
from sources import vectorstore
from sources.models import Chunk

DEPTH = 50  # max(top_k * CANDIDATE_FACTOR, 50) at the shipped top_k


def subset(matrix: dense_matrix.DenseMatrix, rows: np.ndarray) -> dense_matrix.DenseMatrix:
    return dense_matrix.DenseMatrix(
        folder=matrix.folder,
        version=matrix.version,
        ids=matrix.ids[rows],
        collections=matrix.collections[rows],
        vectors=np.asarray(matrix.vectors[rows]),
        signs=matrix.signs,
    )


def variants(matrix: dense_matrix.DenseMatrix) -> dict[str, dense_matrix.DenseMatrix]:
    chunk_row = matrix.ids % vectorstore.WINDOW_SLOTS == 0
    windowed = np.unique(matrix.ids[~chunk_row] // vectorstore.WINDOW_SLOTS)
    alone = chunk_row & ~np.isin(matrix.ids // vectorstore.WINDOW_SLOTS, windowed)
    return {
        "chunks": subset(matrix, np.flatnonzero(chunk_row)),
        "windows": subset(matrix, np.flatnonzero(~chunk_row | alone)),
        "chunks+windows": matrix,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=_common.DEFAULT_DATA)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    model = settings.FOUNDRY.embedding.model
    results: dict = {"machine": _common.machine_line(), "window_sentences": settings.FOUNDRY.ingest.window_sentences}
    with _common.scifact(args.data) as beir:
        matrix, _ = dense.current(model)
        results["rows"] = {
            "chunks": int(np.sum(matrix.ids % vectorstore.WINDOW_SLOTS == 0)),
            "all": int(matrix.ids.size),
        }
        qvec = dict(zip(beir.queries, llm.embed(list(beir.queries.values()), model=model)))
        bm25 = {
            q: ChunkSearch.search.keyword(t, limit=DEPTH, max_df=settings.FOUNDRY.retrieval.bm25_max_df)
            for q, t in beir.queries.items()
        }
        source_of = dict(Chunk.objects.values_list("pk", "source_id"))
        for name, copy in variants(matrix).items():
            hits = {q: copy.search(qvec[q], k=DEPTH, collection_ids=None) for q in beir.queries}
            row = {"rows": int(copy.ids.size), "alone": ndcg(beir, hits)}
            for k in (60, 10, 1):
                row[f"chunk k={k}"] = ndcg(
                    beir, {q: reciprocal_rank_fusion({"bm25": bm25[q], "dense": hits[q]}, k=k) for q in beir.queries}
                )
            row["document k=3"] = ndcg(
                beir,
                {
                    q: document_rank_fusion({"bm25": bm25[q], "dense": hits[q]}, source_of=source_of, k=3)
                    for q in beir.queries
                },
            )
            results[name] = row
            print(f"{name}: {row}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
