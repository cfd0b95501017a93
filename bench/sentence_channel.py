"""A third retrieval channel measured on SciFact (train claims, dev data only): every
sentence (or window of ``--window`` consecutive sentences) of every chunk embedded on its
own, a chunk scoring its best one.

    /work/main/.venv/bin/python bench/sentence_channel.py [--window 1] [--data DIR] [--json out.json]
    /work/main/.venv/bin/python bench/sentence_channel.py --squad FILE [--window 2] [--limit 800]

``--squad`` measures the other side instead: on the SQuAD knowledge base of
``bench/passage_recall.py`` (5 articles, seed 0), how often one of the first 1, 3 and 5
chunks of the shipped chunk fusion (RRF, configured k, depth 50) holds a gold answer, with
whole-chunk vectors and with windows as the dense channel (ranking only, no gate).

Not a product feature: it answers "would sentence vectors lift nDCG@10, and at what cost?"
(docs/decisions.md, D0013). The BM25 and chunk-dense channels are the product's own
(``keyword`` with every term, ``nearest``, depth 500) on the cached ``foundry eval retrieval``
index; the sentences come from the product's chunker splitter and are embedded as the
product embeds a chunk (its stored context, a blank line, the text) with the configured
model, once, into FOUNDRY_HOME/artifacts/bench/ (here: 47k sentences 30 min with the
benchmarks' default OMP_NUM_THREADS=1, 37k windows 19 min with 2).
Fusion is Foundry's own ``reciprocal_rank_fusion`` / ``document_rank_fusion``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from pathlib import Path

import _common  # noqa: F401  (Django set-up)
import numpy as np
from django.conf import settings
from retrieval_sweep import ndcg

from core import llm
from retrieval.fusion import Hit, document_rank_fusion, reciprocal_rank_fusion
from retrieval.models import ChunkSearch
from sources.models import Chunk
from sources.services.chunking import _sentences

DEPTH = 500


def sentence_vectors(model: str, window: int) -> tuple[np.ndarray, np.ndarray, dict]:
    """(chunk id per window, unit vectors, timing), embedded once and cached by the windows' text.
    A chunk of fewer sentences than ``window`` is one window."""
    chunks = list(Chunk.objects.order_by("pk").values_list("pk", "context", "text"))
    owners, texts = [], []
    for pk, context, text in chunks:
        sentences = [sentence.strip() for _, sentence in _sentences(text)]
        for start in range(max(1, len(sentences) - window + 1)):
            part = " ".join(sentences[start : start + window])
            owners.append(pk)
            texts.append(f"{context}\n\n{part}" if context else part)
    key = hashlib.sha256(json.dumps([model, texts]).encode()).hexdigest()[:16]
    folder = settings.FOUNDRY_HOME / "artifacts" / "bench"
    folder.mkdir(parents=True, exist_ok=True)
    cached, meta = folder / f"sentences-{key}.npy", folder / f"sentences-{key}.json"
    if cached.exists():
        return np.array(owners), np.load(cached), json.loads(meta.read_text())
    start = time.perf_counter()
    vectors = np.asarray(llm.embed(texts, model=model), dtype=np.float32)
    seconds = time.perf_counter() - start
    sample = [f"{c}\n\n{t}" if c else t for _, c, t in chunks[:1000]]
    start = time.perf_counter()
    llm.embed(sample, model=model)
    chunk_rate = len(sample) / (time.perf_counter() - start)
    timing = {
        "chunks": len(chunks),
        "sentences": len(texts),
        "sentence_embed_s": round(seconds, 1),
        "sentences_per_s": round(len(texts) / seconds, 1),
        "chunks_per_s": round(chunk_rate, 1),
        "embed_time_vs_chunks": round(seconds / (len(chunks) / chunk_rate), 2),
    }
    np.save(cached, vectors / np.linalg.norm(vectors, axis=1, keepdims=True))
    meta.write_text(json.dumps(timing))
    return np.array(owners), np.load(cached), timing


def sentence_hits(query: np.ndarray, owners: np.ndarray, vectors: np.ndarray) -> list[Hit]:
    """Chunks ranked by their best sentence's cosine, depth ``DEPTH``."""
    scores = vectors @ query
    order = np.argsort(-scores, kind="stable")
    hits, seen = [], set()
    for row in order:
        chunk = int(owners[row])
        if chunk not in seen:
            seen.add(chunk)
            hits.append(Hit(chunk, float(scores[row])))
            if len(hits) == DEPTH:
                break
    return hits


def squad_passages(path: Path, window: int, limit: int) -> dict:
    """hit@1/3/5 of chunk fusion on SQuAD's answerable in-corpus questions, chunk vectors vs windows."""
    from passage_recall import contains_answer

    from foundry_site.evaluation.answers import sample, squad_index
    from foundry_site.evaluation.squad import load_squad

    model, k = settings.FOUNDRY.embedding.model, settings.FOUNDRY.retrieval.rrf_k
    articles = load_squad(path)
    kb, _ = sample(articles, kb_articles=5, limit=3, seed=0)
    asked = [q for a in kb for q in a.questions if not q.impossible][:limit]
    with squad_index(path, kb):
        owners, vectors, timing = sentence_vectors(model, window)
        text_of = dict(Chunk.objects.values_list("pk", "text"))
        qvec = np.asarray(llm.embed([q.question for q in asked], model=model), dtype=np.float32)
        results: dict = {"questions": len(asked), "chunks": len(text_of), "rrf_k": k, "timing": timing}
        hits: dict[str, dict[int, int]] = {"chunk vectors": {1: 0, 3: 0, 5: 0}, "windows": {1: 0, 3: 0, 5: 0}}
        for q, vector in zip(asked, qvec):
            bm25 = ChunkSearch.search.keyword(q.question, limit=50)
            dense = {
                "chunk vectors": ChunkSearch.search.nearest(vector.tolist(), model=model, k=50),
                "windows": sentence_hits(vector / np.linalg.norm(vector), owners, vectors)[:50],
            }
            for name, channel in dense.items():
                ranked = reciprocal_rank_fusion({"bm25": bm25, "dense": channel}, k=k)
                for n in hits[name]:
                    hits[name][n] += any(contains_answer(text_of[h.chunk_id], q.answers) for h in ranked[:n])
        for name, counts in hits.items():
            results[name] = {f"hit@{n}": round(v / len(asked), 4) for n, v in counts.items()}
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--window", type=int, default=1, help="consecutive sentences per vector")
    parser.add_argument("--data", type=Path, default=_common.DEFAULT_DATA)
    parser.add_argument("--squad", type=Path, default=None, help="SQuAD 2.0 file: measure passages instead")
    parser.add_argument("--limit", type=int, default=800, help="--squad: answerable questions at most")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    model = settings.FOUNDRY.embedding.model
    results: dict = {}
    if args.squad:
        results = {
            **squad_passages(args.squad, args.window, args.limit),
            "window": args.window,
            "machine": _common.machine_line(),
        }
        print(json.dumps(results, indent=2))
        if args.json:
            args.json.write_text(json.dumps(results, indent=2))
        return
    with _common.scifact(args.data) as beir:
        print(f"SciFact: {len(beir.queries)} queries; machine: {_common.machine_line()}", flush=True)
        owners, vectors, results["timing"] = sentence_vectors(model, args.window)
        print(f"sentence vectors: {results['timing']}", flush=True)
        qvec = dict(
            zip(beir.queries, np.asarray(llm.embed(list(beir.queries.values()), model=model), dtype=np.float32))
        )
        channels = {
            "bm25": {q: ChunkSearch.search.keyword(t, limit=DEPTH, max_df=1.0) for q, t in beir.queries.items()},
            "dense": {q: ChunkSearch.search.nearest(qvec[q].tolist(), model=model, k=DEPTH) for q in beir.queries},
            "sentences": {q: sentence_hits(qvec[q] / np.linalg.norm(qvec[q]), owners, vectors) for q in beir.queries},
        }
        results["alone"] = {name: ndcg(beir, hits) for name, hits in channels.items()}
        print(f"alone: {results['alone']}", flush=True)
        source_of = dict(Chunk.objects.values_list("pk", "source_id"))
        sets = {
            "bm25+dense": ("bm25", "dense"),
            "bm25+sentences": ("bm25", "sentences"),
            "bm25+dense+sentences": ("bm25", "dense", "sentences"),
        }
        for label, names in sets.items():
            for weights in ({n: 1 for n in names}, {n: (2 if n == "bm25" else 1) for n in names}):
                for fusion in ("chunk", "document"):
                    for k in (1, 3, 5, 10, 60):
                        fused = {}
                        for q in beir.queries:
                            picked = {n: channels[n][q][:50] for n in names}  # the shipped depth (top_k 10)
                            fused[q] = (
                                reciprocal_rank_fusion(picked, k=k, weights=weights)
                                if fusion == "chunk"
                                else document_rank_fusion(picked, source_of=source_of, k=k, weights=weights)
                            )
                        name = f"{label} {fusion} k={k} bm25 weight {weights['bm25']}"
                        results[name] = ndcg(beir, fused)
        best = sorted(((v, k) for k, v in results.items() if isinstance(v, float)), reverse=True)[:10]
        for value, name in best:
            print(f"  {value:.4f}  {name}")
    results["window"] = args.window
    results["machine"] = _common.machine_line()
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
