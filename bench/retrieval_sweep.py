"""Pipeline options measured on SciFact (train queries, dev data only): BM25 tokenizer and
column (title) weights, RRF k and channel weights, chunk- vs document-level fusion,
score (convex) fusion, channel depth, HyDE, and leaving common terms out of the BM25
query (``retrieval.bm25_max_df``, ``retrieval.bm25_max_postings``).

    /work/main/.venv/bin/python bench/retrieval_sweep.py [--data DIR] [--bm25-variants] [--hyde 100]
        [--bm25-max-df 0.2,0.1,0.05] [--bm25-max-postings 0.2,0.1,0.05] [--json out.json]

Channels are computed once per query (BM25 variants by raw FTS5 queries on a
temporary table, dense by the real vec0 search) and fused offline with the same
``reciprocal_rank_fusion`` Foundry uses, so every combination is scored on exactly
the same hits. nDCG@10 is over documents (best chunk).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import _common  # Django set-up
from django.conf import settings
from django.db import connection
from django.test.utils import override_settings

from core import llm
from foundry_site.evaluation import metrics
from retrieval import search
from retrieval.fusion import Hit, document_rank_fusion, reciprocal_rank_fusion
from retrieval.models import ChunkSearch
from retrieval.search import fts_query, query_terms, rare_terms
from retrieval.services.retrieve import retrieve
from sources.models import Chunk

DEPTH = 500
TOKENIZERS = {"porter": "porter unicode61 remove_diacritics 2", "unicode61": "unicode61 remove_diacritics 2"}
COLUMN_WEIGHTS = [(1, 1, 1), (1, 0, 0), (1, 0.5, 0.5), (1, 0, 1), (1, 0, 2), (1, 2, 2), (1, 0, 3)]


def temp_fts(tokenizer: str) -> str:
    """A temporary FTS5 copy of chunks_fts with another tokenizer (connection-local, dropped on close)."""
    name = f"bench_fts_{tokenizer}"
    with connection.cursor() as cur:
        cur.execute(
            f"CREATE VIRTUAL TABLE temp.{name} USING fts5(text, heading, title, tokenize = '{TOKENIZERS[tokenizer]}')"
        )
        cur.execute(
            f"INSERT INTO temp.{name}(rowid, text, heading, title) "
            "SELECT c.id, c.text, c.heading, s.title FROM sources_chunk c "
            "JOIN sources_source s ON s.id = c.source_id"
        )
    return name


def fts_query_extra_stopwords(text: str) -> str:
    """``fts_query`` with scikit-learn's 318 English stop words dropped as well (a query-side variant)."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return " OR ".join(t for t in fts_query(text).split(" OR ") if t.strip('"') not in ENGLISH_STOP_WORDS)


def bm25_hits(table: str, text: str, weights: tuple[float, float, float], query_fn=fts_query) -> list[Hit]:
    query = query_fn(text)
    if not query:
        return []
    with connection.cursor() as cur:
        cur.execute(
            f"SELECT rowid, bm25({table}, %s, %s, %s) FROM {table} WHERE {table} MATCH %s ORDER BY 2 LIMIT %s",
            [*weights, query, DEPTH],
        )
        return [Hit(cid, -s) for cid, s in cur.fetchall()]


def ndcg(beir: _common.Beir, ranked: dict[str, list[Hit]], limit: int = 100) -> float:
    doc_of = beir.index.doc_of_chunk
    return round(
        metrics.mean(
            [
                metrics.ndcg_at_k(metrics.dedupe([doc_of[h.chunk_id] for h in hits[:limit]]), beir.qrels[q], 10)
                for q, hits in ranked.items()
            ]
        ),
        4,
    )


def channels(beir: _common.Beir, variants: bool) -> tuple[dict, dict[str, list[Hit]]]:
    model = settings.FOUNDRY.embedding.model
    vectors = dict(zip(beir.queries, llm.embed(list(beir.queries.values()), model=model)))
    dense = {q: ChunkSearch.search.nearest(vectors[q], model=model, k=DEPTH) for q in beir.queries}
    bm25 = {}
    for tokenizer in TOKENIZERS if variants else ("porter",):
        table = temp_fts(tokenizer)
        for weights in COLUMN_WEIGHTS if variants else [(1, 1, 1)]:
            bm25[(tokenizer, weights)] = {q: bm25_hits(table, t, weights) for q, t in beir.queries.items()}
        if tokenizer == "porter":
            bm25[("porter+sklearn-stopwords", (1, 1, 1))] = {
                q: bm25_hits(table, t, (1, 1, 1), fts_query_extra_stopwords) for q, t in beir.queries.items()
            }
    return bm25, dense


def pruning_table(
    beir: _common.Beir, dense: dict[str, list[Hit]], settings_: list[tuple[float, float]], floor: int = 0
) -> dict:
    """nDCG@10 of BM25 alone and of hybrid RRF (k=60, chunk level) with the product's ``keyword()``
    at each (``retrieval.bm25_max_df``, ``retrieval.bm25_max_postings``); plus the share of query
    terms kept, the chunks the kept terms hold together (a share of the index: what FTS5 scores)
    and BM25's time per query. The floor that keeps every term of a small index (``PRUNE_FLOOR``,
    10,000 shipped) is ``floor``: 0 measures the share rules as they apply to a large index."""
    shipped, search.PRUNE_FLOOR = search.PRUNE_FLOOR, floor
    out = {}
    try:
        for max_df, max_postings in settings_:
            with connection.cursor() as cur:
                start = time.perf_counter()
                hits = {
                    q: ChunkSearch.search.keyword(t, limit=DEPTH, max_df=max_df, max_postings=max_postings)
                    for q, t in beir.queries.items()
                }
                ms = (time.perf_counter() - start) * 1000 / len(beir.queries)
                kept = {q: rare_terms(cur, query_terms(t), max_df, max_postings) for q, t in beir.queries.items()}
                cur.execute("SELECT count(*) FROM chunks_fts")
                total = cur.fetchone()[0]
                matched = [_common.chunks_matching(cur, terms) / total for terms in kept.values()]
            label = f"max_df={max_df} max_postings={max_postings}"
            out[label] = {
                "bm25": ndcg(beir, hits),
                "bm25_ms": round(ms, 1),
                "terms_kept": round(
                    metrics.mean([len(kept[q]) / max(1, len(query_terms(t))) for q, t in beir.queries.items()]), 3
                ),
                "matched_share_mean": round(metrics.mean(matched), 4),
                "matched_share_p95": round(metrics.percentile(matched, 95), 4),
                **{
                    f"hybrid depth={d}": ndcg(
                        beir,
                        {q: reciprocal_rank_fusion({"bm25": hits[q][:d], "dense": dense[q][:d]}, k=60) for q in hits},
                    )
                    for d in (50, DEPTH)
                },
            }
            print(f"floor={floor} {label}: {out[label]}", flush=True)
    finally:
        search.PRUNE_FLOOR = shipped
    return out


def fusion_table(beir: _common.Beir, bm25: dict[str, list[Hit]], dense: dict[str, list[Hit]], depth: int) -> dict:
    out = {}
    for k in (5, 10, 20, 30, 45, 60, 100):
        for wb, wd in ((1, 1), (1.25, 1), (1.5, 1), (2, 1), (1, 1.25), (1, 1.5)):
            fused = {
                q: reciprocal_rank_fusion(
                    {"bm25": bm25[q][:depth], "dense": dense[q][:depth]}, k=k, weights={"bm25": wb, "dense": wd}
                )
                for q in beir.queries
            }
            out[f"k={k} bm25:dense={wb}:{wd}"] = ndcg(beir, fused)
    return out


def document_fusion_table(
    beir: _common.Beir, bm25: dict[str, list[Hit]], dense: dict[str, list[Hit]], depth: int
) -> dict:
    """Foundry's ``document_rank_fusion`` (a source ranks at its best chunk) for a range of k."""
    source_of = dict(Chunk.objects.values_list("pk", "source_id"))
    out = {}
    for k in (1, 2, 3, 5, 8, 10, 15, 20, 30, 60):
        for wb, wd in ((1, 1), (1.25, 1), (1, 1.25)):
            fused = {
                q: document_rank_fusion(
                    {"bm25": bm25[q][:depth], "dense": dense[q][:depth]},
                    source_of=source_of,
                    k=k,
                    weights={"bm25": wb, "dense": wd},
                )
                for q in beir.queries
            }
            out[f"doc k={k} bm25:dense={wb}:{wd}"] = ndcg(beir, fused)
    return out


def convex_table(beir: _common.Beir, bm25: dict[str, list[Hit]], dense: dict[str, list[Hit]], depth: int) -> dict:
    """Score fusion per document: alpha * minmax(bm25) + (1 - alpha) * minmax(cosine), a source's
    channel score being its best chunk's (Bruch et al. 2023 found this beats RRF when tuned)."""
    doc_of = beir.index.doc_of_chunk

    def per_doc(hits: list[Hit]) -> dict[str, float]:
        best: dict[str, float] = {}
        for h in hits[:depth]:
            d = doc_of[h.chunk_id]
            best[d] = max(best.get(d, h.score), h.score)
        if not best:
            return {}
        lo, hi = min(best.values()), max(best.values())
        return {d: (v - lo) / (hi - lo) if hi > lo else 1.0 for d, v in best.items()}

    out = {}
    for alpha in (0.2, 0.3, 0.4, 0.5, 0.6, 0.7):
        scores = []
        for q in beir.queries:
            b, v = per_doc(bm25[q]), per_doc(dense[q])
            fused = {d: alpha * b.get(d, 0.0) + (1 - alpha) * v.get(d, 0.0) for d in b.keys() | v.keys()}
            ranked = [d for d, _ in sorted(fused.items(), key=lambda kv: (-kv[1], kv[0]))]
            scores.append(metrics.ndcg_at_k(ranked, beir.qrels[q], 10))
        out[f"convex alpha(bm25)={alpha}"] = round(metrics.mean(scores), 4)
    return out


def hyde_compare(beir: _common.Beir, count: int) -> dict:
    """Hybrid with and without HyDE (the configured local model) on the first ``count`` queries."""
    subset = dict(list(beir.queries.items())[:count])
    out = {}
    for hyde in (False, True):
        conf = settings.FOUNDRY.with_overrides(retrieval={"hyde": hyde})
        with override_settings(FOUNDRY=conf):
            start, scores = time.perf_counter(), []
            for qid, text in subset.items():
                found = retrieve(question=text, collection_ids=None, mode="hybrid", top_k=10)
                ranked = metrics.dedupe([beir.index.doc_of_chunk[c.chunk.pk] for c in found.ranked])
                scores.append(metrics.ndcg_at_k(ranked, beir.qrels[qid], 10))
            out[f"hyde={hyde}"] = {
                "ndcg@10": round(metrics.mean(scores), 4),
                "ms_per_query": round((time.perf_counter() - start) * 1000 / len(subset), 1),
            }
        print(f"  hyde={hyde}: {out[f'hyde={hyde}']}", flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=_common.DEFAULT_DATA)
    parser.add_argument(
        "--bm25-variants", action="store_true", help="also sweep the BM25 tokenizer and column weights (slow)"
    )
    parser.add_argument("--hyde", type=int, default=0, help="queries for the HyDE comparison (0: skip)")
    parser.add_argument(
        "--bm25-max-df",
        default="",
        help="comma-separated retrieval.bm25_max_df values to compare with 1 (keep every term)",
    )
    parser.add_argument(
        "--bm25-max-postings",
        default="",
        help="comma-separated retrieval.bm25_max_postings values (at the shipped bm25_max_df) to "
        "compare with keeping every term, with the share rules alone and with the shipped floor",
    )
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    results: dict = {}
    with _common.scifact(args.data) as beir:
        print(f"SciFact: {len(beir.queries)} queries; machine: {_common.machine_line()}", flush=True)
        bm25, dense = channels(beir, args.bm25_variants)
        results["dense"] = ndcg(beir, dense)
        results["bm25"] = {f"{t} weights={w}": ndcg(beir, hits) for (t, w), hits in bm25.items()}
        print(f"dense alone: {results['dense']}\nBM25 variants:", flush=True)
        for name, value in sorted(results["bm25"].items(), key=lambda kv: -kv[1]):
            print(f"  {value:.4f}  {name}")
        best_bm25 = max(bm25, key=lambda k: results["bm25"][f"{k[0]} weights={k[1]}"])
        for key in dict.fromkeys([("porter", (1, 1, 1)), best_bm25]):
            for depth in (50, DEPTH):
                label = f"fusion bm25[{key[0]} {key[1]}] depth={depth}"
                results[label] = fusion_table(beir, bm25[key], dense, depth)
                best = sorted(results[label].items(), key=lambda kv: -kv[1])[:5]
                print(f"{label}: k=60 1:1 -> {results[label]['k=60 bm25:dense=1:1']:.4f}; best {best}", flush=True)
                for kind, table in (("document fusion", document_fusion_table), ("convex fusion", convex_table)):
                    label = f"{kind} bm25[{key[0]} {key[1]}] depth={depth}"
                    results[label] = table(beir, bm25[key], dense, depth)
                    best = sorted(results[label].items(), key=lambda kv: -kv[1])[:5]
                    print(f"{label}: best {best}", flush=True)
        if args.bm25_max_df:
            values = [(float(v), search.NO_POSTINGS_CAP) for v in ["1", *args.bm25_max_df.split(",")]]
            results["bm25_max_df"] = pruning_table(beir, dense, values)
        if args.bm25_max_postings:
            max_df = settings.FOUNDRY.retrieval.bm25_max_df
            values = [(1.0, search.NO_POSTINGS_CAP), (max_df, search.NO_POSTINGS_CAP)] + [
                (max_df, float(v)) for v in args.bm25_max_postings.split(",")
            ]
            results["bm25_max_postings"] = {
                f"floor={floor}": pruning_table(beir, dense, values, floor) for floor in (0, search.PRUNE_FLOOR)
            }
        if args.hyde:
            results["hyde"] = hyde_compare(beir, args.hyde)
    results["machine"] = _common.machine_line()
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
