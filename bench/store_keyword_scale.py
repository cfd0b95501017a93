"""Keyword search (BM25) at scale on either store: FTS5 (SQLite) or the tsvector index (PostgreSQL).

    FOUNDRY_HOME=/tmp/kw-sqlite nice /work/main/.venv/bin/python bench/store_keyword_scale.py --chunks 100000
    FOUNDRY_HOME=/tmp/kw-pg FOUNDRY_DATABASE_URL=postgresql://…/scale nice … store_keyword_scale.py --chunks 100000

The database the settings name (an empty one; it is migrated first) is filled through the real schema, so
the keyword index is written by its triggers: ``--chunks`` chunks of 150 words each, drawn from a Zipf
distribution (exponent 1.05) over 30,000 made-up words with twelve real ones at its head (so "pump", "valve"
or "sensor" are in most chunks: the worst case for a keyword search). Then each question is searched three
times as the hybrid mode does (with ``bm25_max_df`` 0.05 and ``bm25_max_postings`` 0.1) and as ``mode: bm25``
does (every term). Prints the fill time and the mean time per search. A filled database is reused.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "foundry_site.settings")

import django  # noqa: E402

django.setup()

import numpy as np  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection, transaction  # noqa: E402

from retrieval.models import ChunkSearch  # noqa: E402
from sources.models import Chunk, Collection, Source  # noqa: E402

REAL = "pump valve pressure sensor bus firmware network temperature seal impeller bearing cable".split()
QUESTIONS = [
    "pump valve pressure",
    "Which sensor on the bus measures the temperature of the seal?",
    "w5000 w12000 impeller",
]
PER_SOURCE = 500


def fill(chunks: int) -> float:
    rng = np.random.default_rng(1)
    vocab = REAL + [f"w{i}" for i in range(30_000)]
    weights = 1 / np.arange(1, len(vocab) + 1) ** 1.05
    weights /= weights.sum()
    collection = Collection.objects.create(name="scale")
    start = time.perf_counter()
    for number in range(chunks // PER_SOURCE):
        with transaction.atomic():
            source = Source.objects.create(
                root="/scale",
                path=f"doc{number}.md",
                name=f"doc{number}.md",
                title=f"Doc {number}",
                collection=collection,
            )
            Chunk.objects.bulk_create(
                Chunk(
                    source=source,
                    ordinal=i,
                    text=" ".join(rng.choice(vocab, 150, p=weights)),
                    heading="",
                    token_count=150,
                    line_start=1,
                    line_end=1,
                )
                for i in range(PER_SOURCE)
            )
    if connection.vendor == "postgresql":  # as autovacuum would: planner statistics, and the visibility map that
        with connection.cursor() as cur:  # lets BM25's term rows be read from their index alone
            cur.execute("SELECT to_regclass('chunks_fts_terms') IS NOT NULL")
            tables = ["chunks_fts", "chunks_fts_terms"] if cur.fetchone()[0] else ["chunks_fts"]
            for table in tables:
                cur.execute(f"VACUUM ANALYZE {table}")
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    if not Chunk.objects.exists():
        print(f"filled {args.chunks} chunks in {fill(args.chunks):.0f} s ({connection.vendor})")
    print(f"{Chunk.objects.count()} chunks, store {connection.vendor}")
    for question in QUESTIONS:
        for label, limits in (("hybrid", {"max_df": 0.05, "max_postings": 0.1}), ("bm25", {})):
            ChunkSearch.search.keyword(question, limit=50, **limits)
            start = time.perf_counter()
            for _ in range(3):
                hits = ChunkSearch.search.keyword(question, limit=50, **limits)
            ms = (time.perf_counter() - start) / 3 * 1000
            top = ", ".join(f"{h.chunk_id}:{h.score:.4f}" for h in hits[:3])
            print(f"{ms:8.0f} ms  {label:<6}  {len(hits)} hits ({top})  {question!r}")


if __name__ == "__main__":
    main()
