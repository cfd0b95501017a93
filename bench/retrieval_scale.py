"""Retrieval latency and memory at 10k / 100k / 1M chunks.

    nice /work/main/.venv/bin/python bench/retrieval_scale.py [--sizes 10000,100000,1000000] [--queries 100]
    BENCH_SCALE_HOME=/tmp/foundry-scale-keep ... --sizes 1000000 --measure-only   # re-measure a kept database
    nice /work/main/.venv/bin/python bench/retrieval_scale.py --sizes 100000 --incremental  # matrix refresh only
    BENCH_SCALE_HOME=... --sizes 1000000 --measure-only --bm25-max-df 1,0.1,0.05   # keyword channel only
    BENCH_SCALE_HOME=... --sizes 1000000 --measure-only --bm25-max-postings 64,0.2,0.1

For each size, a database (under $TMPDIR, or $BENCH_SCALE_HOME to keep and re-measure
it) is filled through the real schema: real SciFact sentences as chunk text (FTS5
rows by the chunk triggers) and synthetic unit vectors (384-d, float32) in the
model's vec0 tables: one per chunk and ``--windows`` (3) sentence windows per chunk
near it, as the shipped ``ingest.window_sentences`` stores them. Then, per query (real
SciFact claims; their real MiniLM vectors), it times the BM25 channel, the dense channel both ways (vec0 scan, and the
memory-mapped matrix of ``retrieval/dense.py`` including its per-query version
check, scanned exactly and through its sign-bit shortlist), and the full hybrid
``retrieve()`` with each dense index (the matrix as shipped, i.e. shortlisted above
``retrieval.dense_exact_max_rows``, and exact). It also times the
matrix build (a cold one, after each fill) and the version check alone. Prints
P50/P95 per method, DB and matrix size, and peak RSS (which counts the mapped
matrix pages this process touched; they are shared page cache, not private memory).

``--incremental`` measures only the matrix refresh: after a full build, it appends 1 %
more chunks (the same fill) and times the refresh from the previous copy against a
build from nothing at the same version, then appends one source of 100 chunks and
deletes one source of 5,000 chunks, doing the same after each; three times (``--rounds``).
It checks the two hold the same live rows (vectors, sign bits, ids, collections).

``--bm25-max-df`` / ``--bm25-max-postings`` time only the keyword channel (unscoped and
scoped to the collection) and hybrid ``retrieve()`` at each ``retrieval.bm25_max_df`` (every
``bm25_max_postings``) / ``retrieval.bm25_max_postings`` (the shipped ``bm25_max_df``), and
report the share of query terms each keeps and the chunks FTS5 scores; ``--bm25-parts`` times
the parts of the keyword channel as shipped.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

HOME = Path(os.environ.get("BENCH_SCALE_HOME") or tempfile.mkdtemp(prefix="foundry-scale-"))
HOME.mkdir(parents=True, exist_ok=True)
os.environ["FOUNDRY_HOME"] = str(HOME)
os.environ["FOUNDRY_DB"] = str(HOME / "scale.sqlite3")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common  # noqa: E402  (Django set-up)
import numpy as np  # noqa: E402
from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402

from core import llm  # noqa: E402
from foundry_site.evaluation import metrics  # noqa: E402
from retrieval import dense, dense_matrix  # noqa: E402
from retrieval.models import ChunkSearch  # noqa: E402
from retrieval.search import NO_POSTINGS_CAP  # noqa: E402
from retrieval.services.retrieve import retrieve  # noqa: E402
from sources import vectorstore  # noqa: E402
from sources.models import Collection  # noqa: E402

DIM = 384
BATCH = 5000
DOCUMENT = 100  # chunks of the small append of --incremental
# Per dimension: |noise| ~ 0.75 of a unit vector, so a window's cosine to its chunk is ~0.8 (real
# SciFact windows: 0.906). Latency does not depend on it beyond the per-chunk pass's widening.
WINDOW_NOISE = 0.038


def sentences(data: Path) -> list[str]:
    from foundry_site.evaluation.beir import load_corpus

    out = []
    for doc in load_corpus(data / "corpus.jsonl").values():
        out += [s.strip() + "." for s in doc.text.split(". ") if len(s) > 40]
    return out


def fill(total: int, texts: list[str], rng: np.random.Generator, windows: int = 0) -> None:
    """Add chunks (their vectors, and ``windows`` window vectors each) until the database holds ``total``."""
    model = settings.FOUNDRY.embedding.model
    vectorstore.ensure_table(model, DIM)
    vectorstore.ensure_windows_table(model, DIM)
    with connection.cursor() as cur:
        cur.execute("SELECT count(*) FROM sources_chunk")
        have = cur.fetchone()[0]
    collection, _ = Collection.objects.get_or_create(name="scale")
    for start in range(have, total, BATCH):
        count = min(BATCH, total - start)
        _insert_batch(start, count, texts, rng, collection.pk, model, windows)
        print(f"\r  filled {start + count}/{total}", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)


def _insert_batch(
    start: int, count: int, texts: list[str], rng: np.random.Generator, collection_id: int, model: str, windows: int
) -> None:
    vectors = unit(rng.standard_normal((count, DIM)))
    with connection.cursor() as cur:
        cur.execute(
            "INSERT INTO sources_source(collection_id, root, path, title, kind, sha256, size, status, "
            "reason, chunk_count, embedding_model, created_at, updated_at) VALUES "
            "(%s, '/scale', 'batch-' || (SELECT coalesce(max(id), 0) + 1 FROM sources_source) || '.md', %s, "
            "'md', '', 0, 'ingested', '', %s, %s, datetime(), datetime())",
            [collection_id, f"Batch {start}", count, model],
        )
        source_id = cur.lastrowid
        rows = [
            (source_id, i, " ".join(texts[(start + i + j * 7919) % len(texts)] for j in range(3)), "", 1, 1, 60)
            for i in range(count)
        ]
        cur.executemany(
            "INSERT INTO sources_chunk(source_id, ordinal, text, heading, line_start, line_end, "
            "token_count, context, created_at) VALUES (%s, %s, %s, %s, %s, %s, %s, '', datetime())",
            rows,
        )
        cur.execute("SELECT id FROM sources_chunk WHERE source_id = %s ORDER BY ordinal", [source_id])
        ids = [r[0] for r in cur.fetchall()]
        cur.executemany(
            f"INSERT INTO {vectorstore.table_name(model)}(chunk_id, collection_id, embedding) VALUES (%s, %s, %s)",
            [(cid, collection_id, v.tobytes()) for cid, v in zip(ids, vectors)],
        )
        for slot in range(windows):
            # A window's vector lies near its chunk's (cosine ~0.8), as a real window's does: the
            # best rows of a query then often share a chunk, which the per-chunk pass must widen for.
            near = unit(vectors + WINDOW_NOISE * rng.standard_normal((count, DIM)))
            cur.executemany(
                f"INSERT INTO {vectorstore.windows_table_name(model)}(window_id, collection_id, embedding) "
                "VALUES (%s, %s, %s)",
                [(vectorstore.window_id(cid, slot), collection_id, v.tobytes()) for cid, v in zip(ids, near)],
            )


def unit(vectors: np.ndarray) -> np.ndarray:
    vectors = vectors.astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def timed(fn, items: list) -> dict[str, float]:
    return timed_turns({"": fn}, items)[""]


def measure_pruning(queries: list[str], values: list[tuple[float, float]]) -> dict:
    """The keyword channel (unscoped, and scoped to the one collection) and hybrid ``retrieve()``
    at each (``retrieval.bm25_max_df``, ``retrieval.bm25_max_postings``), with the share of query
    terms it keeps and the chunks those terms hold together (what FTS5 scores). The settings
    take turns query by query, so a change of load or cache affects them alike."""
    from retrieval.search import query_terms, rare_terms

    scope = [Collection.objects.get(name="scale").pk]
    out, timed_fns = {}, {}
    for max_df, max_postings in values:
        with connection.cursor() as cur:
            kept = [rare_terms(cur, query_terms(q), max_df, max_postings) for q in queries]
            matched = [_common.chunks_matching(cur, terms) for terms in kept]
        options = {"max_df": max_df, "max_postings": max_postings}
        label = f"bm25_max_df={max_df} bm25_max_postings={max_postings}"
        out[label] = {
            "terms_kept": round(metrics.mean([len(k) / max(1, len(query_terms(q))) for k, q in zip(kept, queries)]), 3),
            "chunks_matched": {f"p{n}": round(metrics.percentile(matched, n)) for n in (50, 95)},
        }
        timed_fns[(label, "bm25")] = lambda q, o=options: ChunkSearch.search.keyword(q, limit=50, **o)
        timed_fns[(label, "bm25 scoped")] = lambda q, o=options: ChunkSearch.search.keyword(
            q, limit=50, collection_ids=scope, **o
        )
        timed_fns[(label, "hybrid retrieve() matrix")] = _common.with_retrieval(
            lambda q: retrieve(question=q, collection_ids=None, mode="hybrid"),
            bm25_max_df=max_df,
            bm25_max_postings=max_postings,
        )
    for (label, name), summary in timed_turns(timed_fns, queries).items():
        out[label][name] = summary
    print(json.dumps(out), flush=True)
    return out


def measure_keyword_parts(queries: list[str]) -> dict:
    """Where the keyword channel's time goes, as hybrid ``retrieve()`` runs it: choosing the terms
    (``rare_terms``), the ranked FTS5 query, and the same query counting its matches without
    ranking them; with the chunks matched, and how each time follows them."""
    from retrieval.search import match_expression, query_terms, rare_terms

    conf = settings.FOUNDRY.retrieval
    parts: dict[str, list[float]] = {"choose terms": [], "ranked query": [], "count, not ranked": [], "matched": []}
    with connection.cursor() as cur:
        for query in queries:
            start = time.perf_counter()
            terms = rare_terms(cur, query_terms(query), conf.bm25_max_df, conf.bm25_max_postings)
            chosen = time.perf_counter()
            cur.execute(
                "SELECT rowid, bm25(chunks_fts) FROM chunks_fts WHERE chunks_fts MATCH %s ORDER BY 2 LIMIT 50",
                [match_expression(terms)],
            )
            cur.fetchall()
            ranked = time.perf_counter()
            parts["matched"].append(_common.chunks_matching(cur, terms))
            counted = time.perf_counter()
            for name, (a, b) in {
                "choose terms": (start, chosen),
                "ranked query": (chosen, ranked),
                "count, not ranked": (ranked, counted),
            }.items():
                parts[name].append((b - a) * 1000)
    out = {
        name: {"p50": round(metrics.percentile(v, 50), 1), "p95": round(metrics.percentile(v, 95), 1)}
        for name, v in parts.items()
    }
    out["correlation with matched"] = {
        name: round(float(np.corrcoef(parts[name], parts["matched"])[0, 1]), 2)
        for name in ("choose terms", "ranked query")
    }
    print(json.dumps(out), flush=True)
    return out


def timed_turns(fns: dict, items: list) -> dict:
    """P50/P95 ms of each of ``fns`` over ``items``, the functions taking turns on each item
    (each runs once first, to warm up)."""
    for fn in fns.values():
        fn(items[0])
    values = {key: [] for key in fns}
    for item in items:
        for key, fn in fns.items():
            start = time.perf_counter()
            fn(item)
            values[key].append((time.perf_counter() - start) * 1000)
    return {key: metrics.latency_summary(v) for key, v in values.items()}


def measure(size: int, queries: list[str], vectors: list[list[float]], *, vec0: bool = True) -> dict:
    model, shortlist = settings.FOUNDRY.embedding.model, settings.FOUNDRY.retrieval.dense_shortlist
    build_s, matrix = build(model, fresh=True)
    assert np.unique(matrix.ids // vectorstore.WINDOW_SLOTS).size == size, (len(matrix.ids), size)
    pairs = list(zip(queries, vectors))
    out = {
        "matrix_build_s": build_s,
        "matrix_rows": int(matrix.ids.size),
        "matrix_mb": round(sum(f.stat().st_size for f in matrix.folder.iterdir()) / 2**20, 1),
        "version check": timed(lambda p: vectorstore.vectors_version(model), pairs),
        "bm25 (FTS5)": timed(lambda p: ChunkSearch.search.keyword(p[0], limit=50), pairs),
    }
    if vec0:  # vec0 and matrix agree on the top 50 (exact search both ways)
        out["top50_identical_of_10"] = sum(
            [h.chunk_id for h in ChunkSearch.search.nearest(v, model=model, k=50)]
            == [h.chunk_id for h in dense.nearest(v, model=model, k=50)]
            for v in vectors[:10]
        )
        out["dense (vec0 scan)"] = timed(lambda p: ChunkSearch.search.nearest(p[1], model=model, k=50), pairs)
    out |= {
        "dense (matrix)": timed(lambda p: dense.nearest(p[1], model=model, k=50), pairs),
        f"dense (matrix, shortlist {shortlist})": timed(
            lambda p: dense.nearest(p[1], model=model, k=50, shortlist=shortlist), pairs
        ),
        # random unit vectors: the worst case for sign bits (bench/dense_shortlist.py measures real ones)
        "shortlist_top50_kept": metrics.mean(
            [
                len(
                    {h.chunk_id for h in dense.nearest(v, model=model, k=50)}
                    & {h.chunk_id for h in dense.nearest(v, model=model, k=50, shortlist=shortlist)}
                )
                / 50
                for v in vectors[:20]
            ]
        ),
    }
    for kind in ("vec0",) * vec0 + ("matrix", "matrix exact"):
        stages: dict[str, list[float]] = {"embed": [], "search": []}

        def run(p, stages=stages):
            timings = retrieve(question=p[0], collection_ids=None, mode="hybrid").timings
            for stage in stages:
                stages[stage].append(timings[stage])

        options = (
            {"dense_index": "matrix", "dense_exact_max_rows": 10**9}
            if kind == "matrix exact"
            else {"dense_index": kind}
        )
        out[f"hybrid retrieve() {kind}"] = timed(_common.with_retrieval(run, **options), pairs)
        for stage, values in stages.items():  # the warm-up call is the first value
            out[f"  of which {stage} ({kind})"] = metrics.latency_summary(values[1:])
    out["db_mb"] = round(sum(f.stat().st_size for f in HOME.glob("scale.sqlite3*")) / 2**20, 1)
    out["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    out["load"] = [round(x, 2) for x in os.getloadavg()]
    return out


def measure_incremental(
    size: int, texts: list[str], rng: np.random.Generator, windows: int, rounds: int = 3
) -> list[dict]:
    """Append 1 % of ``size`` chunks, refresh the matrix vs build it from nothing (same version); then
    append one source of ``DOCUMENT`` chunks (a document's worth), then delete one source of ``BATCH``
    chunks, and do the same after each."""
    from sources.models import Source
    from sources.services.ingest import source_delete

    model = settings.FOUNDRY.embedding.model
    out = []
    build(model, fresh=True)
    for _ in range(rounds):
        with connection.cursor() as cur:
            cur.execute("SELECT count(*) FROM sources_chunk")
            have = cur.fetchone()[0]
        for change in ("append", "append a document", "delete"):
            if change == "append":
                fill(have + size // 100, texts, rng, windows)
            elif change == "append a document":
                fill(have + size // 100 + DOCUMENT, texts, rng, windows)
            else:
                batches = list(Source.objects.filter(path__startswith="batch-").values_list("pk", flat=True))
                source_delete(source_id=int(rng.choice(batches)))
            refresh_s, refreshed = build(model, fresh=False)
            refreshed_digest, dead = digest(refreshed), 0 if refreshed.live is None else int((~refreshed.live).sum())
            full_s, full = build(model, fresh=True)
            out.append(
                {
                    "change": change,
                    "rows": len(full.ids),
                    "dead_rows": dead,
                    "refresh_s": refresh_s,
                    "full_build_s": full_s,
                    "differing_parts": [k for k, v in digest(full).items() if v != refreshed_digest[k]],
                    "load": round(os.getloadavg()[0], 2),
                }
            )
    return out


def build(model: str, *, fresh: bool) -> tuple[float, dense_matrix.DenseMatrix]:
    """Time the matrix build for the current version (from nothing when ``fresh``)."""
    if fresh:
        shutil.rmtree(dense.root_folder(model), ignore_errors=True)
    dense._loaded.clear()
    start = time.perf_counter()
    matrix, built = dense.current(model)
    assert built
    return round(time.perf_counter() - start, 2), matrix


def digest(matrix: dense_matrix.DenseMatrix) -> dict[str, str]:
    """Of what the copy holds for search, per part: its live rows' vectors, sign bits, ids and collections."""
    live = np.ones(matrix.ids.size, bool) if matrix.live is None else matrix.live
    vectors, signs = hashlib.sha256(), hashlib.sha256()
    for start in range(0, live.size, 1 << 20):
        part = slice(start, start + (1 << 20))
        vectors.update(np.asarray(matrix.vectors[part][live[part]]).tobytes())
        signs.update(np.ascontiguousarray(matrix.signs[:, part][:, live[part]].T).tobytes())  # row by row
    return {
        "vectors": vectors.hexdigest(),
        "signs": signs.hexdigest(),
        "ids": hashlib.sha256(matrix.ids[live].tobytes()).hexdigest(),
        "collections": hashlib.sha256(matrix.collections[live].tobytes()).hexdigest(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--data", type=Path, default=_common.DEFAULT_DATA)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument(
        "--windows",
        type=int,
        default=3,
        help="window vectors per chunk (SciFact's chunks average 3.1 under the shipped "
        "ingest.window_sentences 2; 0: chunk vectors only)",
    )
    parser.add_argument(
        "--no-vec0", action="store_true", help="skip the vec0 scans (seconds per query at 1M chunks with windows)"
    )
    parser.add_argument("--measure-only", action="store_true", help="do not fill; measure the kept database")
    parser.add_argument("--fill-only", action="store_true", help="fill the database (to measure it later)")
    parser.add_argument(
        "--bm25-max-df",
        default="",
        help="only time the keyword channel and hybrid retrieve() at these retrieval.bm25_max_df "
        "values (comma-separated), on the kept database",
    )
    parser.add_argument("--rounds", type=int, default=3, help="rounds of --incremental")
    parser.add_argument(
        "--bm25-parts",
        action="store_true",
        help="only time the parts of the keyword channel (choosing terms, ranking, counting)",
    )
    parser.add_argument(
        "--bm25-max-postings",
        default="",
        help="the same at these retrieval.bm25_max_postings values (at the shipped bm25_max_df)",
    )
    parser.add_argument(
        "--incremental",
        action="store_true",
        help="measure only the matrix refresh after appending 1 %% (vs a full build)",
    )
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    from foundry_site.evaluation.beir import load_queries

    queries = list(load_queries(args.data / "queries.jsonl").values())[: args.queries]
    vectors = llm.embed(queries, model=settings.FOUNDRY.embedding.model)
    texts, rng, results = sentences(args.data), np.random.default_rng(0), {}
    print(f"machine: {_common.machine_line()}; database {HOME}", flush=True)
    for size in sorted(int(s) for s in args.sizes.split(",")):
        start = time.perf_counter()
        if not args.measure_only:
            fill(size, texts, rng, args.windows)
        fill_s = round(time.perf_counter() - start, 1)
        if args.fill_only:
            results[size] = {"fill_s": fill_s}
        elif args.bm25_parts:
            results[size] = measure_keyword_parts(queries)
        elif args.bm25_max_df or args.bm25_max_postings:
            max_df = settings.FOUNDRY.retrieval.bm25_max_df
            values = [(float(v), NO_POSTINGS_CAP) for v in args.bm25_max_df.split(",") if v] + [
                (max_df, float(v)) for v in args.bm25_max_postings.split(",") if v
            ]
            results[size] = measure_pruning(queries, values)
        elif args.incremental:
            results[size] = {
                "fill_s": fill_s,
                "incremental": measure_incremental(size, texts, rng, args.windows, args.rounds),
            }
        else:
            results[size] = {"fill_s": fill_s, **measure(size, queries, vectors, vec0=not args.no_vec0)}
        print(json.dumps({size: results[size]}), flush=True)
    results["machine"] = _common.machine_line()
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
