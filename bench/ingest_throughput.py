"""Ingest throughput against the embedding model's raw encode rate on the same chunks.

    .venv/bin/python bench/ingest_throughput.py [--window-sentences N] [FOLDER ...]

Uses a throw-away FOUNDRY_HOME, LLM enrichment off (context prefixes and summaries
`none`), the configured embedding model and ``ingest.window_sentences`` (or N). Prints
chunks/s for the full ingest and for `encode()` alone on the exact texts ingest embedded
(each chunk and each of its sentence windows), their ratio, and peak RSS.
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

HOME = Path(tempfile.mkdtemp(prefix="foundry-bench-"))
os.environ.update(FOUNDRY_HOME=str(HOME), DJANGO_SETTINGS_MODULE="foundry_site.settings")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402

from core import llm  # noqa: E402
from core.llm import local  # noqa: E402
from sources import vectorstore  # noqa: E402
from sources.models import Chunk  # noqa: E402
from sources.services.chunking import chunk_windows  # noqa: E402
from sources.services.ingest_jobs import knowledge_base_ingest  # noqa: E402
from tests.conftest import config_with  # noqa: E402


def main(folders: list[Path], window_sentences: int | None) -> dict:
    windows = settings.FOUNDRY.ingest.window_sentences if window_sentences is None else window_sentences
    settings.FOUNDRY = config_with(
        settings.FOUNDRY,
        embedding={"context_model": "none"},
        ingest={"summary_model": "none", "window_sentences": windows},
    )
    call_command("migrate", verbosity=0)
    model = settings.FOUNDRY.embedding.model
    llm.embed(["warm-up"], model=model)  # load the model outside both timings
    start = time.perf_counter()
    files = []
    for folder in folders:
        files += knowledge_base_ingest(target=folder).files
    ingest_s = time.perf_counter() - start
    chunks = list(Chunk.objects.order_by("id"))
    texts = [f"{c.context}\n\n{c.text}" if c.context else c.text for c in chunks]
    texts += [
        f"{c.context}\n\n{w}" if c.context else w
        for c in chunks
        for w in chunk_windows(c.text, sentences=windows, limit=vectorstore.WINDOW_SLOTS - 1)
    ]
    embedder = local._local.embedder(model.split("/", 1)[1])
    texts = [llm.embedding_prefix(model, "passage") + t for t in texts]  # as llm.embed sends them
    start = time.perf_counter()
    embedder.encode(texts, batch_size=settings.FOUNDRY.embedding.batch_size)
    encode_s = time.perf_counter() - start
    statuses = {s: sum(1 for f in files if f.status == s) for s in {f.status for f in files}}
    return {
        "folders": [str(f) for f in folders],
        "files": statuses,
        "window_sentences": windows,
        "chunks": len(chunks),
        "vectors": len(texts),
        "window_vectors": vectorstore.window_count(model),
        "ingest_s": round(ingest_s, 2),
        "ingest_chunks_per_s": round(len(chunks) / ingest_s, 1),
        "encode_s": round(encode_s, 2),
        "encode_vectors_per_s": round(len(texts) / encode_s, 1),
        "ratio": round(encode_s / ingest_s, 3),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "load_avg_1m": os.getloadavg()[0],
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "folders", nargs="*", type=Path, default=[Path(__file__).resolve().parent.parent / "knowledge_base"]
    )
    parser.add_argument("--window-sentences", type=int, default=None)
    options = parser.parse_args()
    print(json.dumps(main(options.folders, options.window_sentences), indent=2))
