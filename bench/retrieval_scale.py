"""Retrieval latency and memory at 10k / 100k / 1M chunks.

    /work/main/.venv/bin/python bench/retrieval_scale.py [--sizes 10000,100000,1000000] [--queries 100]

For each size, a throw-away database (under $TMPDIR) is filled through the real
schema: real SciFact sentences as chunk text (FTS5 rows by the chunk triggers) and
synthetic unit vectors (384-d, float32) in the model's vec0 table. Then, per query
(real SciFact claims; their real MiniLM vectors), it times Foundry's channels and
the full hybrid ``retrieve()``, plus an exact numpy scan over the same vectors and
a sqlite-vec binary-quantised scan with exact rescoring of a shortlist (the
candidate for faster dense search). Prints P50/P95 per method, DB size and RSS.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

HOME = Path(tempfile.mkdtemp(prefix="foundry-scale-"))
os.environ["FOUNDRY_HOME"] = str(HOME)
os.environ["FOUNDRY_DB"] = str(HOME / "scale.sqlite3")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common  # noqa: E402  (Django set-up)
import numpy as np  # noqa: E402
from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402

from foundry_site import llm  # noqa: E402
from retrieval.evaluation import metrics  # noqa: E402
from retrieval.models import ChunkSearch  # noqa: E402
from retrieval.services.retrieve import retrieve  # noqa: E402
from sources import vectorstore  # noqa: E402
from sources.models import Collection  # noqa: E402

DIM = 384
BATCH = 5000
SHORTLIST = 200


def sentences(data: Path) -> list[str]:
    from retrieval.evaluation.beir import load_corpus

    out = []
    for doc in load_corpus(data / "corpus.jsonl").values():
        out += [s.strip() + "." for s in doc.text.split(". ") if len(s) > 40]
    return out


def fill(total: int, texts: list[str], rng: np.random.Generator) -> None:
    """Add chunks (and their vectors) until the database holds ``total``."""
    model = settings.FOUNDRY.embedding.model
    vectorstore.ensure_table(model, DIM)
    with connection.cursor() as cur:
        cur.execute("CREATE VIRTUAL TABLE IF NOT EXISTS bench_bits USING vec0(chunk_id integer primary key, "
                    f"embedding bit[{DIM}])")
        cur.execute("SELECT count(*) FROM sources_chunk")
        have = cur.fetchone()[0]
    collection, _ = Collection.objects.get_or_create(name="scale")
    for start in range(have, total, BATCH):
        count = min(BATCH, total - start)
        _insert_batch(start, count, texts, rng, collection.pk, model)
        print(f"\r  filled {start + count}/{total}", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)


def _insert_batch(start: int, count: int, texts: list[str], rng: np.random.Generator, collection_id: int,
                  model: str) -> None:
    vectors = rng.standard_normal((count, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    with connection.cursor() as cur:
        cur.execute("INSERT INTO sources_source(collection_id, root, path, title, kind, sha256, size, status, "
                    "reason, chunk_count, embedding_model, created_at, updated_at) VALUES "
                    "(%s, '/scale', %s, %s, 'md', '', 0, 'ingested', '', %s, %s, datetime(), datetime())",
                    [collection_id, f"batch-{start}.md", f"Batch {start}", count, model])
        source_id = cur.lastrowid
        rows = [(source_id, i, " ".join(texts[(start + i + j * 7919) % len(texts)] for j in range(3)), "",
                 1, 1, 60) for i in range(count)]
        cur.executemany("INSERT INTO sources_chunk(source_id, ordinal, text, heading, line_start, line_end, "
                        "token_count, context, created_at) VALUES (%s, %s, %s, %s, %s, %s, %s, '', datetime())", rows)
        cur.execute("SELECT id FROM sources_chunk WHERE source_id = %s ORDER BY ordinal", [source_id])
        ids = [r[0] for r in cur.fetchall()]
        cur.executemany(f"INSERT INTO {vectorstore.table_name(model)}(chunk_id, collection_id, embedding) "
                        "VALUES (%s, %s, %s)", [(cid, collection_id, v.tobytes()) for cid, v in zip(ids, vectors)])
        cur.executemany("INSERT INTO bench_bits(chunk_id, embedding) VALUES (%s, vec_quantize_binary(%s))",
                        [(cid, v.tobytes()) for cid, v in zip(ids, vectors)])


def binary_rescore(vector: list[float], k: int) -> list[tuple[int, float]]:
    """Hamming KNN on 1-bit vectors for a shortlist, then exact cosine on the float vectors of that shortlist."""
    blob = vectorstore.serialize(vector)
    with connection.cursor() as cur:
        cur.execute("SELECT chunk_id FROM bench_bits WHERE embedding MATCH vec_quantize_binary(%s) AND k = %s",
                    [blob, max(SHORTLIST, k)])
        ids = [r[0] for r in cur.fetchall()]
    sims = ChunkSearch.search.similarity(vector, ids, model=settings.FOUNDRY.embedding.model)
    return sorted(sims.items(), key=lambda kv: -kv[1])[:k]


def timed(fn, items: list) -> dict[str, float]:
    fn(items[0])
    values = []
    for item in items:
        start = time.perf_counter()
        fn(item)
        values.append((time.perf_counter() - start) * 1000)
    return metrics.latency_summary(values)


def measure(size: int, queries: list[str], vectors: list[list[float]]) -> dict:
    model = settings.FOUNDRY.embedding.model
    with connection.cursor() as cur:
        cur.execute(f"SELECT chunk_id, embedding FROM {vectorstore.table_name(model)}")
        rows = cur.fetchall()
    matrix = np.vstack([np.frombuffer(r[1], dtype=np.float32) for r in rows])
    pairs = list(zip(queries, vectors))
    out = {
        "bm25 (FTS5)": timed(lambda p: ChunkSearch.search.keyword(p[0], limit=50), pairs),
        "dense (vec0 scan)": timed(lambda p: ChunkSearch.search.nearest(p[1], model=model, k=50), pairs),
        "dense (numpy exact)": timed(lambda p: np.argpartition(-(matrix @ np.asarray(p[1], np.float32)), 50)[:50],
                                     pairs),
        "dense (vec0 1-bit + rescore)": timed(lambda p: binary_rescore(p[1], 50), pairs),
        "hybrid retrieve() total": timed(lambda p: retrieve(question=p[0], collection_ids=None, mode="hybrid"),
                                         pairs),
    }
    del matrix
    out["db_mb"] = round(sum(f.stat().st_size for f in HOME.glob("scale.sqlite3*")) / 2**20, 1)
    out["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--data", type=Path, default=_common.DEFAULT_DATA)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    from retrieval.evaluation.beir import load_queries

    queries = list(load_queries(args.data / "queries.jsonl").values())[:args.queries]
    vectors = llm.embed(queries, model=settings.FOUNDRY.embedding.model)
    texts, rng, results = sentences(args.data), np.random.default_rng(0), {}
    print(f"machine: {_common.machine_line()}; database {HOME}", flush=True)
    for size in sorted(int(s) for s in args.sizes.split(",")):
        start = time.perf_counter()
        fill(size, texts, rng)
        results[size] = {"fill_s": round(time.perf_counter() - start, 1), **measure(size, queries, vectors)}
        print(json.dumps({size: results[size]}), flush=True)
    results["machine"] = _common.machine_line()
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
