"""Shared set-up of the benchmarks: Django, the SciFact files and the cached eval index, Celery workers.

The index is the one ``foundry eval retrieval`` builds (FOUNDRY_HOME/eval-cache/…),
so a benchmark after an eval run embeds nothing. A benchmark that sets its own
FOUNDRY_* environment imports this module after setting it (Django is set up here).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
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


def with_retrieval(fn, **options):
    """``fn`` run with some ``retrieval.*`` options set."""
    from django.conf import settings

    def run(item):
        saved = settings.FOUNDRY
        settings.FOUNDRY = saved.with_overrides(retrieval=options)
        try:
            return fn(item)
        finally:
            settings.FOUNDRY = saved

    return run


def chunks_matching(cursor, terms: list[str]) -> int:
    """How many chunks hold any of ``terms``: what FTS5 ranks for a keyword query of them."""
    from retrieval.search import match_expression

    cursor.execute("SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH %s", [match_expression(terms)])
    return cursor.fetchone()[0]


# See tests/broker.py: keep a shared virtualenv's editable-install hook out of the workers.
WORKER_BOOT = (
    "import sys; sys.meta_path[:] = [f for f in sys.meta_path if 'Editable' not in repr(f)]; "
    "from celery.__main__ import main; sys.argv[0] = 'celery'; sys.exit(main())"
)


class Workers:
    """Celery workers as subprocesses, one per queue (``-c 1``), each in its own process group so that a
    kill takes it whole, as a crashed machine would. The ``db`` worker also runs celery beat (the
    stale-run sweeper); a ``compute`` worker runs with FOUNDRY_COMPUTE_ONLY=1 (no database).
    Logs go to ``home/worker-<queue>.log``."""

    def __init__(self, home: Path, env: dict[str, str], *, app: str = "foundry_site") -> None:
        self.home, self.env, self.app = home, env, app
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, queue: str) -> float:
        """Start the worker of ``queue`` and return the seconds until it consumes."""
        log = self.home / f"worker-{queue}.log"
        offset = log.stat().st_size if log.exists() else 0
        argv = [sys.executable, "-c", WORKER_BOOT, "-A", self.app, "worker", "-Q", queue, "-n", f"{queue}@%h"]
        argv += ["-c", "1", "--loglevel", "INFO", "--without-mingle", "--without-gossip"]
        env = dict(self.env)
        if queue == "db":
            argv += ["--beat", "--schedule", str(self.home / "beat-schedule")]
        else:
            env["FOUNDRY_COMPUTE_ONLY"] = "1"
        start = time.monotonic()
        with log.open("ab") as out:
            self.procs[queue] = subprocess.Popen(
                argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        while b" ready." not in log.read_bytes()[offset:]:
            assert self.procs[queue].poll() is None, log.read_text()[-3000:]
            time.sleep(0.2)
        return time.monotonic() - start

    def kill(self, queue: str, sig: int = signal.SIGKILL) -> None:
        proc = self.procs.pop(queue)
        if proc.poll() is None:
            os.killpg(proc.pid, sig)
            proc.wait(timeout=30)

    def kill_all(self) -> None:
        for queue in list(self.procs):
            self.kill(queue)
