"""Pseudo-relevance feedback for the dense channel on SciFact (train claims): is it worth a second search?

    /work/main/.venv/bin/python bench/retrieval_prf.py

Rocchio on unit vectors: the query vector plus ``beta`` times the mean vector of the first
``m`` chunks of a feedback ranking (dense, hybrid or BM25), searched again exactly; the
new dense ranking is fused with BM25 by chunk-level RRF (k=60, the default) and by
document-level RRF (k=3). nDCG@10 over documents, depth 100. Not adopted
(bench/results/prf_2026-11-22.json): no setting beats the hybrid default by more than 0.006.
"""

from __future__ import annotations

import _common
import numpy as np
from django.conf import settings

from core import llm
from foundry_site.evaluation import metrics
from retrieval.fusion import Hit, document_rank_fusion, reciprocal_rank_fusion
from retrieval.models import ChunkSearch
from sources import vectorstore
from sources.models import Chunk

DEPTH = 100


def main() -> None:
    with _common.scifact() as beir:
        print(f"machine: {_common.machine_line()}", flush=True)
        model = settings.FOUNDRY.embedding.model
        rows = [
            (unit // vectorstore.WINDOW_SLOTS, np.frombuffer(blob, dtype=np.float32))
            for batch in ChunkSearch.search.vector_batches(model=model)
            for unit, _collection, blob in batch
            if unit % vectorstore.WINDOW_SLOTS == 0
        ]  # chunk vectors
        ids = np.array([cid for cid, _ in rows])
        matrix = np.stack([v for _, v in rows])
        matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
        row_of = {int(cid): i for i, cid in enumerate(ids)}
        source_of = dict(Chunk.objects.values_list("id", "source_id"))
        qids = list(beir.queries)
        queries = np.array(llm.embed([beir.queries[q] for q in qids], model=model), dtype=np.float32)

        def search(vector: np.ndarray) -> list[Hit]:
            scores = matrix @ vector
            top = np.argpartition(-scores, DEPTH)[:DEPTH]
            return [Hit(int(ids[i]), float(scores[i])) for i in top[np.argsort(-scores[top])]]

        def ndcg(ranked: dict[str, list[Hit]]) -> float:
            doc_of = beir.index.doc_of_chunk
            return round(
                metrics.mean(
                    [
                        metrics.ndcg_at_k(metrics.dedupe([doc_of[h.chunk_id] for h in hits]), beir.qrels[q], 10)
                        for q, hits in ranked.items()
                    ]
                ),
                4,
            )

        dense = {q: search(queries[i]) for i, q in enumerate(qids)}
        bm25 = {q: ChunkSearch.search.keyword(beir.queries[q], limit=DEPTH) for q in qids}
        hybrid = {q: reciprocal_rank_fusion({"bm25": bm25[q], "dense": dense[q]}, k=60) for q in qids}
        print(f"no feedback: dense {ndcg(dense)} bm25 {ndcg(bm25)} hybrid {ndcg(hybrid)}", flush=True)
        for name, feedback in (("dense", dense), ("hybrid", hybrid), ("bm25", bm25)):
            for m in (1, 3, 5):
                for beta in (0.25, 0.5, 1.0):
                    again = {}
                    for i, q in enumerate(qids):
                        vector = queries[i] + beta * matrix[[row_of[h.chunk_id] for h in feedback[q][:m]]].mean(0)
                        again[q] = search(vector / np.linalg.norm(vector))
                    chunk = {q: reciprocal_rank_fusion({"bm25": bm25[q], "dense": again[q]}, k=60) for q in qids}
                    document = {
                        q: document_rank_fusion({"bm25": bm25[q], "dense": again[q]}, source_of=source_of, k=3)
                        for q in qids
                    }
                    print(
                        f"feedback={name} m={m} beta={beta}: dense {ndcg(again)} hybrid(chunk, 60) "
                        f"{ndcg(chunk)} hybrid(document, 3) {ndcg(document)}",
                        flush=True,
                    )


if __name__ == "__main__":
    main()
