"""Recovery after a worker is SIGKILLed at a random point of an ingest or a generation run.

    python bench/worker_recovery.py [--ingest 6] [--generate 3] [--files 12] [--model-call 20] [--seed 1]
                                    [--redis redis://127.0.0.1:6379/13]

Real Celery workers (one ``db`` worker with the embedded beat, one ``compute`` worker, ``-c 1``
each, the app of ``tests/broker_worker_app.py``) against a real Redis database (flushed before and
after), with the recovery settings at their defaults (heartbeat, stale window, sweep interval).
Each trial starts the work, waits a random time, SIGKILLs a worker (for ingest the compute or the
db worker, chosen at random; for generation the compute worker inside its model call), restarts
it at once, as a supervisor would, and measures the time from the kill until the work is finished.
A generation run's model call is simulated by a sleep of ``--model-call`` seconds (a spec that says
``slow-compute``), so the kill lands inside a call that outlasts the heartbeat interval.

Checked after every trial: the job succeeded with every file once and nothing else, every source's
chunks are numbered 0..n-1 (no duplicate), chunks = FTS rows = vectors (``foundry check``), and for
generation one document, no temporary file. Prints one JSON object; docs/reliability.md has the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
ARGS = argparse.ArgumentParser()
ARGS.add_argument("--ingest", type=int, default=6, help="ingest trials")
ARGS.add_argument("--generate", type=int, default=3, help="generation trials")
ARGS.add_argument("--files", type=int, default=12, help="files per ingest")
ARGS.add_argument("--model-call", type=float, default=20.0, help="seconds a generation's model call takes")
ARGS.add_argument("--seed", type=int, default=1)
ARGS.add_argument("--redis", default="redis://127.0.0.1:6379/13")
OPTS = ARGS.parse_args()

HOME = Path(tempfile.mkdtemp(prefix="foundry-recovery-bench-"))
CONFIG = HOME / "foundry.yaml"
CONFIG.write_text("ingest:\n  summary_model: none\nembedding:\n  context_model: none\nretrieval:\n  hyde: false\n")
for key in ("FOUNDRY_JOB_STALE_SECONDS", "FOUNDRY_HEARTBEAT_SECONDS", "FOUNDRY_SWEEP_INTERVAL"):
    os.environ.pop(key, None)  # the defaults are what is measured
os.environ.update(
    FOUNDRY_HOME=str(HOME),
    FOUNDRY_CONFIG=str(CONFIG),
    DJANGO_SETTINGS_MODULE="foundry_site.settings",
    FOUNDRY_BROKER_URL=OPTS.redis,
    FOUNDRY_TEST_SLOW_SECONDS=str(OPTS.model_call),
)
# Built before _common sets its defaults (OMP_NUM_THREADS): the workers run as a deployment would.
WORKER_ENV = {**os.environ, "PYTHONPATH": str(REPO)}
sys.path.insert(0, str(REPO))

import redis  # noqa: E402
from _common import Workers  # noqa: E402  (sets Django up, with the environment above)
from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402

from generation.documents import SpecText  # noqa: E402
from generation.models import GenerationRun  # noqa: E402
from generation.pipeline import generation_run_create  # noqa: E402
from generation.tasks import generate_document  # noqa: E402
from sources.models import Chunk, IngestJob, Source  # noqa: E402
from sources.services import ingest, ingest_jobs  # noqa: E402
from sources.services.integrity import index_check  # noqa: E402

WORKERS = Workers(HOME, WORKER_ENV, app="tests.broker_worker_app")
SPEC = SpecText("note", 1, "# Note\n\n## Overview\n\n## Details (slow-compute)\n")
FINISHED = ("succeeded", "needs_review", "failed")


def make_corpus(folder: Path, files: int, trial: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    line = "Station {n} reports pressure {p} bar, flow {f} l/min and temperature {t} C every {s} seconds."
    for n in range(files):
        parts = [
            f"## Part {p}\n\n" + " ".join(line.format(n=n, p=p + i, f=i * 3, t=20 + i, s=trial + 1) for i in range(8))
            for p in range(4)
        ]
        (folder / f"station-{n:03}.md").write_text(f"# Station {n} (trial {trial})\n\n" + "\n\n".join(parts) + "\n")


def ingest_checked(job: IngestJob, files: int) -> dict[str, Any]:
    paths = [r["path"] for r in job.results]
    sources = Source.objects.filter(root=job.root)
    ordinals_ok = all(
        list(s.chunks.order_by("ordinal").values_list("ordinal", flat=True)) == list(range(s.chunk_count))
        for s in sources
    )
    check = index_check()  # in this long-lived process, which read the index before the workers wrote
    fresh = subprocess.run(
        [sys.executable, "-c", "from foundry_site.cli import main; main()", "check"],
        env=WORKER_ENV,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    return {
        "status": job.status,
        "attempts": job.attempts,
        "files_once": len(paths) == len(set(paths)) == files,
        "all_ingested": {r["status"] for r in job.results} == {"ingested"},
        "sources": sources.count(),
        "chunks_match": job.chunks_done == Chunk.objects.filter(source__root=job.root).count(),
        "ordinals_ok": ordinals_ok,
        "index_ok": fresh.returncode == 0,  # `foundry check` in a new process, as a user runs it
        "check_problems": [line for line in fresh.stdout.splitlines() if line.startswith("PROBLEM")],
        "long_lived_connection_check": check.sqlite if check.ok else f"{check.sqlite}; {check.problems}",
    }


def ingest_trial(trial: int, rng: random.Random) -> dict[str, Any]:
    kb = HOME / f"kb-{trial}"
    make_corpus(kb, OPTS.files, trial)
    job = ingest_jobs.ingest_job_create(target=kb)
    victim = rng.choice(["compute", "db"])
    start = time.monotonic()
    ingest_jobs.ingest_job_enqueue(job_id=job.pk)
    # A random point of the ingest: up to the time the first clean run took.
    delay = rng.uniform(0.2, BASELINE["ingest_s"] * 0.9)
    time.sleep(delay)
    done_at_kill = IngestJob.objects.get(pk=job.pk).files_done
    WORKERS.kill(victim)
    killed = time.monotonic()
    restart = WORKERS.start(victim)
    job = ingest_jobs.ingest_job_wait(job_id=job.pk, timeout=600)
    recovery = time.monotonic() - killed
    return {
        "killed": victim,
        # what the kill cost: the job's time beyond a clean run of the same size
        "delay_over_clean_s": round(time.monotonic() - start - BASELINE["ingest_s"], 1),
        "killed_after_s": round(killed - start, 1),
        "files_done_at_kill": done_at_kill,
        "restart_s": round(restart, 1),
        "kill_to_done_s": round(recovery, 1),
        **ingest_checked(job, OPTS.files),
    }


def generation_trial(trial: int, rng: random.Random) -> dict[str, Any]:
    out = HOME / "out" / f"run-{trial}.md"
    run = generation_run_create(topic="pressure and flow of the stations", spec=SPEC, output_path=str(out))
    start = time.monotonic()
    generate_document.delay(run.pk)
    while GenerationRun.objects.get(pk=run.pk).stage != "generate":  # inside the (simulated) model call
        time.sleep(0.05)
    in_call = time.monotonic()
    time.sleep(rng.uniform(0.1, OPTS.model_call * 0.9))
    WORKERS.kill("compute")
    killed = time.monotonic()
    restart = WORKERS.start("compute")
    while (run := GenerationRun.objects.get(pk=run.pk)).status not in FINISHED:
        time.sleep(0.2)
    recovery = time.monotonic() - killed
    return {
        "killed": "compute",
        "killed_after_s": round(killed - start, 1),
        "into_model_call_s": round(killed - in_call, 1),
        "restart_s": round(restart, 1),
        "kill_to_done_s": round(recovery, 1),
        "status": run.status,
        "attempts": run.attempts,
        "document": out.exists(),
        "other_files": sorted(p.name for p in out.parent.iterdir() if not p.name.startswith("run-")),
    }


BASELINE: dict[str, float] = {}


def percentiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {"p50": round(statistics.median(ordered), 1), "p95": round(p95, 1), "max": round(ordered[-1], 1)}


def main() -> None:
    call_command("migrate", verbosity=0)
    client = redis.Redis.from_url(OPTS.redis)
    client.flushdb()
    rng = random.Random(OPTS.seed)
    out: dict[str, Any] = {
        "cpus": os.cpu_count(),
        "heartbeat_s": settings.FOUNDRY_HEARTBEAT_SECONDS,
        "stale_s": settings.FOUNDRY_JOB_STALE_SECONDS,
        "sweep_s": settings.CELERY_BEAT_SCHEDULE["sweep-stale-runs"]["schedule"],
        "load_before": [round(x, 2) for x in os.getloadavg()],
    }
    try:
        out["worker_ready_s"] = {"db": round(WORKERS.start("db"), 1), "compute": round(WORKERS.start("compute"), 1)}
        kb = HOME / "kb-warm"
        make_corpus(kb, OPTS.files, -1)
        start = time.monotonic()
        ingest_jobs.knowledge_base_ingest(target=kb)  # loads the embedding model in the compute worker
        out["ingest_cold_s"] = round(time.monotonic() - start, 1)
        for source_id in Source.objects.filter(root=str(kb)).values_list("pk", flat=True):
            ingest.source_delete(source_id=source_id)
        start = time.monotonic()
        ingest_jobs.knowledge_base_ingest(target=kb)  # the same files as sources for generation to read
        BASELINE["ingest_s"] = time.monotonic() - start
        out["ingest_clean_s"] = round(BASELINE["ingest_s"], 1)
        out["ingest"] = [ingest_trial(t, rng) for t in range(OPTS.ingest)]
        out["generate"] = [generation_trial(t, rng) for t in range(OPTS.generate)]
        out["load_after"] = [round(x, 2) for x in os.getloadavg()]
    finally:
        WORKERS.kill_all()
        client.flushdb()
    trials = out["ingest"] + out["generate"]
    out["recovery_s"] = {
        "ingest": percentiles([t["kill_to_done_s"] for t in out["ingest"]]) if out["ingest"] else {},
        "ingest_delay": percentiles([t["delay_over_clean_s"] for t in out["ingest"]]) if out["ingest"] else {},
        "generate": percentiles([t["kill_to_done_s"] for t in out["generate"]]) if out["generate"] else {},
        "all": percentiles([t["kill_to_done_s"] for t in trials]) if trials else {},
    }
    out["lost_or_duplicated"] = sum(
        1
        for t in out["ingest"]
        if not (t["status"] == "succeeded" and t["files_once"] and t["all_ingested"] and t["ordinals_ok"])
        or not (t["chunks_match"] and t["index_ok"] and t["sources"] == OPTS.files)
    ) + sum(
        1
        for t in out["generate"]
        if t["status"] not in ("succeeded", "needs_review") or not t["document"] or t["other_files"]
    )
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
