"""Shared set-up of the retrieval benchmarks: Django, the SciFact files and the cached eval index.

The index is the one ``foundry eval retrieval`` builds (FOUNDRY_HOME/eval-cache/…),
so a benchmark after an eval run embeds nothing.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "foundry_site.settings")
# Under CPU contention torch's OpenMP threads spin against each other; one thread was
# ~6x faster for single-query encodes on the shared 2-core machine.
os.environ.setdefault("OMP_NUM_THREADS", "1")

import django  # noqa: E402

django.setup()

from foundry_site.evaluation.beir import Document, judged_queries, load_corpus, load_qrels, load_queries  # noqa: E402
from foundry_site.evaluation.index import EvalIndex, cache_key, eval_index  # noqa: E402
from sources.services.prepare import file_digest  # noqa: E402

DEFAULT_DATA = Path(os.environ.get("FOUNDRY_EVAL_DATA", "/work/shared/eval")) / "scifact"


@dataclass
class Beir:
    corpus: dict[str, Document]
    queries: dict[str, str]  # judged queries only
    qrels: dict[str, dict[str, int]]
    index: EvalIndex


def scifact_files(
    data: Path = DEFAULT_DATA, qrels: str = "qrels/train.tsv"
) -> tuple[dict[str, Document], dict[str, str], dict[str, dict[str, int]]]:
    """(corpus, judged queries, qrels) of a BEIR folder."""
    corpus = load_corpus(data / "corpus.jsonl")
    relevance = load_qrels(data / qrels)
    return (
        corpus,
        judged_queries(load_queries(data / "queries.jsonl"), relevance, corpus, qrels_path=data / qrels),
        relevance,
    )


@contextlib.contextmanager
def scifact(data: Path = DEFAULT_DATA, qrels: str = "qrels/train.tsv") -> Iterator[Beir]:
    corpus, judged, relevance = scifact_files(data, qrels)
    key = cache_key(data_sha256=file_digest(data / "corpus.jsonl"))
    with eval_index(name=f"beir-{data.name}", key=key, documents=corpus.values()) as index:
        yield Beir(corpus, judged, relevance, index)


def document_vectors(beir: Beir):
    """The embedding model's vectors of whole documents (title + text, one row per ``beir.corpus``
    entry, in order), cached in the eval index's folder (whose key holds the model)."""
    import numpy as np
    from django.conf import settings

    from core import llm

    model = settings.FOUNDRY.embedding.model
    cache = beir.index.folder / "documents.npy"
    if cache.exists():
        return np.load(cache)
    print(f"embedding {len(beir.corpus)} whole documents with {model}", flush=True)
    bodies = [f"{d.title} {d.text}".strip() for d in beir.corpus.values()]
    matrix = np.asarray(llm.embed(bodies, model=model), dtype=np.float32)
    np.save(cache, matrix)
    return matrix


def machine_line() -> str:
    import platform

    load = os.getloadavg()
    return (
        f"{platform.platform()}, {os.cpu_count()} CPUs ({platform.processor() or platform.machine()}), "
        f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
    )


def chunks_matching(cursor, terms: list[str]) -> int:
    """How many chunks hold any of ``terms``: what FTS5 ranks for a keyword query of them."""
    from retrieval.search import match_expression

    cursor.execute("SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH %s", [match_expression(terms)])
    return cursor.fetchone()[0]
