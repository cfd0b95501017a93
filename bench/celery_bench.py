"""Ingest through Celery: in-process vs 1 vs 2 compute workers, broker overhead, recovery after a kill.

    python bench/celery_bench.py [--files 60] [--summary] [--redis redis://127.0.0.1:6379/12]

Everything runs on this machine: a throw-away FOUNDRY_HOME, a generated corpus of
Markdown files, one db worker and one or two compute workers (``-c 1`` each), the
given Redis database (flushed before and after). LLM enrichment is off unless
``--summary`` (then every file gets a SmolLM2 summary: LLM-bound work).
Prints one JSON object; docs/benchmarks-celery.md explains the numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
ARGS = argparse.ArgumentParser()
ARGS.add_argument("--files", type=int, default=60)
ARGS.add_argument("--summary", action="store_true", help="turn on LLM summaries (local SmolLM2)")
ARGS.add_argument("--redis", default="redis://127.0.0.1:6379/12")
OPTS = ARGS.parse_args()

HOME = Path(tempfile.mkdtemp(prefix="foundry-celery-bench-"))
CONFIG = HOME / "foundry.yaml"
CONFIG.write_text(
    "embedding:\n  context_model: none\ningest:\n  summary_model: "
    + ("local/smollm2-135m\n  summary_max_tokens: 60\n" if OPTS.summary else "none\n")
)
os.environ.update(FOUNDRY_HOME=str(HOME), FOUNDRY_CONFIG=str(CONFIG), DJANGO_SETTINGS_MODULE="foundry_site.settings")
os.environ.pop("FOUNDRY_BROKER_URL", None)
sys.path.insert(0, str(REPO))

import django  # noqa: E402

django.setup()

import redis  # noqa: E402
from django.core.management import call_command  # noqa: E402

from foundry_site.celery import app  # noqa: E402
from sources.models import Source  # noqa: E402
from sources.services import ingest, ingest_jobs  # noqa: E402

# See tests/sources/test_tasks_broker.py: keep a shared virtualenv's editable-install hook out of the workers.
WORKER_BOOT = (
    "import sys; sys.meta_path[:] = [f for f in sys.meta_path if 'Editable' not in repr(f)]; "
    "from celery.__main__ import main; sys.argv[0] = 'celery'; sys.exit(main())"
)
WORKER_ENV = {
    **os.environ,
    "PYTHONPATH": str(REPO),
    "FOUNDRY_BROKER_URL": OPTS.redis,
    "FOUNDRY_JOB_STALE_SECONDS": "20",
    "FOUNDRY_SWEEP_INTERVAL": "2",
}


def make_corpus(folder: Path, files: int, tag: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    sentence = "Station {i} of {tag} reports pressure, flow and temperature to gateway {n} every {n} seconds."
    for n in range(files):
        parts = "\n\n".join(
            f"## Part {p}\n\n" + " ".join(sentence.format(i=i, n=n, tag=tag) for i in range(10)) for p in range(3)
        )
        (folder / f"{tag}-{n:03}.md").write_text(f"# {tag} {n}\n\n{parts}\n")
    return folder


def start_worker(queue: str, name: str) -> subprocess.Popen[bytes]:
    env = dict(WORKER_ENV)
    argv = [
        sys.executable,
        "-c",
        WORKER_BOOT,
        "-A",
        "foundry_site",
        "worker",
        "-Q",
        queue,
        "-n",
        f"{name}@%h",
        "-c",
        "1",
        "--loglevel",
        "INFO",
        "--without-mingle",
        "--without-gossip",
    ]
    if queue == "db":
        argv += ["--beat", "--schedule", str(HOME / "beat")]
    else:
        env["FOUNDRY_COMPUTE_ONLY"] = "1"
    path = HOME / f"{name}.log"
    offset = path.stat().st_size if path.exists() else 0  # a restarted worker appends to its old log
    proc = subprocess.Popen(
        argv, cwd=REPO, env=env, stdout=path.open("ab"), stderr=subprocess.STDOUT, start_new_session=True
    )
    deadline = time.monotonic() + 180
    while b" ready." not in path.read_bytes()[offset:]:
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"worker {name} did not start; see {HOME / name}.log")
        time.sleep(0.2)
    return proc


def kill(proc: subprocess.Popen[bytes], sig: int = signal.SIGKILL) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, sig)
        proc.wait(timeout=60)


def reset() -> None:
    for source_id in Source.objects.values_list("pk", flat=True):
        ingest.source_delete(source_id=source_id)


def use_broker(url: str | None) -> None:
    app.conf.update(broker_url=url or "", result_backend=url, task_always_eager=url is None)
    app._backend_cache = None
    app._local.__dict__.pop("backend", None)
    app._after_fork()


def timed_ingest(target: Path) -> dict[str, float]:
    start = time.monotonic()
    report = ingest_jobs.knowledge_base_ingest(target=target).as_dict()
    seconds = time.monotonic() - start
    assert report["ingested"] == len(list(target.iterdir())), report
    return {
        "seconds": round(seconds, 2),
        "files": report["ingested"],
        "chunks": report["chunks"],
        "files_per_s": round(report["ingested"] / seconds, 2),
        "chunks_per_s": round(report["chunks"] / seconds, 1),
    }


def round_trips(count: int) -> dict[str, float]:
    """A no-op task (celery.accumulate) on the compute queue: one at a time, then all at once."""
    noop = app.tasks["celery.accumulate"]
    noop.apply_async(args=(0,), queue="compute").get(timeout=30)
    start = time.monotonic()
    for i in range(count):
        noop.apply_async(args=(i,), queue="compute").get(timeout=30)
    sequential = (time.monotonic() - start) / count
    start = time.monotonic()
    results = [noop.apply_async(args=(i,), queue="compute") for i in range(count)]
    for result in results:
        result.get(timeout=60)
    pipelined = (time.monotonic() - start) / count
    return {"sequential_ms": round(sequential * 1000, 2), "pipelined_ms": round(pipelined * 1000, 2)}


def recovery(corpus: Path, baseline_s: float) -> dict[str, float]:
    """Kill the compute worker at 30 % of an ingest, restart it at once, time the whole ingest."""
    reset()
    job = ingest_jobs.ingest_job_create(target=corpus)
    start = time.monotonic()
    ingest_jobs.ingest_job_enqueue(job_id=job.pk)
    while ingest_jobs.IngestJob.objects.get(pk=job.pk).files_done < job.files_total * 0.3:
        time.sleep(0.05)
    kill(WORKERS.pop("compute-1"))
    killed = time.monotonic()
    WORKERS["compute-1"] = start_worker("compute", "compute-1")
    restarted = time.monotonic()
    job = ingest_jobs.ingest_job_wait(job_id=job.pk)
    total = time.monotonic() - start
    return {
        "total_s": round(total, 1),
        "baseline_s": baseline_s,
        "extra_s": round(total - baseline_s, 1),
        "restart_s": round(restarted - killed, 1),
        "kill_to_complete_s": round(time.monotonic() - killed, 1),
        "attempts": job.attempts,
        "status": job.status,
    }


WORKERS: dict[str, subprocess.Popen[bytes]] = {}


def main() -> None:
    call_command("migrate", verbosity=0)
    client = redis.Redis.from_url(OPTS.redis)
    client.flushdb()
    corpus = make_corpus(HOME / "corpus", OPTS.files, "main")
    out: dict[str, Any] = {
        "files": OPTS.files,
        "summary": OPTS.summary,
        "cpus": os.cpu_count(),
        "load_before": os.getloadavg(),
    }
    try:
        ingest_jobs.knowledge_base_ingest(target=make_corpus(HOME / "warm0", 2, "warm0"))  # load the model in-process
        reset()
        out["in_process"] = timed_ingest(corpus)
        use_broker(OPTS.redis)
        WORKERS["db"] = start_worker("db", "db")
        WORKERS["compute-1"] = start_worker("compute", "compute-1")
        ingest_jobs.knowledge_base_ingest(target=make_corpus(HOME / "warm1", 2, "warm1"))
        reset()
        out["broker_1_compute"] = timed_ingest(corpus)
        out["overhead_per_task"] = round_trips(300)
        WORKERS["compute-2"] = start_worker("compute", "compute-2")
        ingest_jobs.knowledge_base_ingest(target=make_corpus(HOME / "warm2", 6, "warm2"))
        reset()
        out["broker_2_compute"] = timed_ingest(corpus)
        kill(WORKERS.pop("compute-2"), signal.SIGTERM)
        out["recovery_after_kill"] = recovery(corpus, out["broker_1_compute"]["seconds"])
        out["load_after"] = os.getloadavg()
    finally:
        for proc in WORKERS.values():
            kill(proc)
        client.flushdb()
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
