"""Generation runs in-process vs through Celery (db worker + compute worker), and recovery after a kill.

    python bench/generate_broker.py [--topics 3] [--redis redis://127.0.0.1:6379/14]

Everything runs on this machine: a throw-away FOUNDRY_HOME, the sample knowledge
base, the real local models (SmolLM2 for generation, MiniLM for retrieval and
grounding), one db worker and one compute worker (``-c 1`` each), the given Redis
database (flushed before and after). Prints one JSON object; docs/benchmarks-celery.md
explains the numbers. The in-process runs use one OpenMP thread (``bench/_common.py`` sets
OMP_NUM_THREADS=1 unless it is set); the workers get the environment as it was before.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
ARGS = argparse.ArgumentParser()
ARGS.add_argument("--topics", type=int, default=3)
ARGS.add_argument("--redis", default="redis://127.0.0.1:6379/14")
OPTS = ARGS.parse_args()

HOME = Path(tempfile.mkdtemp(prefix="foundry-gen-broker-bench-"))
CONFIG = HOME / "foundry.yaml"
CONFIG.write_text(
    "ingest:\n  summary_model: none\nembedding:\n  context_model: none\n"
    "retrieval:\n  hyde: false\n  scorer_model: none\ngeneration:\n  max_document_tokens: 300\n"
)
STALE = "40"
os.environ.update(
    FOUNDRY_HOME=str(HOME),
    FOUNDRY_CONFIG=str(CONFIG),
    DJANGO_SETTINGS_MODULE="foundry_site.settings",
    FOUNDRY_JOB_STALE_SECONDS=STALE,
    FOUNDRY_SWEEP_INTERVAL="2",
)
os.environ.pop("FOUNDRY_BROKER_URL", None)
# Built before _common sets its defaults (OMP_NUM_THREADS): the workers run as a deployment would.
WORKER_ENV = {**os.environ, "PYTHONPATH": str(REPO), "FOUNDRY_BROKER_URL": OPTS.redis}
sys.path.insert(0, str(REPO))

import redis  # noqa: E402
from _common import Workers  # noqa: E402  (sets Django up, with the environment above)
from django.core.management import call_command  # noqa: E402

from foundry_site.celery import app  # noqa: E402
from generation.documents import SpecText  # noqa: E402
from generation.models import GenerationRun  # noqa: E402
from generation.pipeline import generation_run_create, generation_run_execute  # noqa: E402
from generation.tasks import generate_document  # noqa: E402
from sources.services.ingest_jobs import knowledge_base_ingest  # noqa: E402

SPEC = SpecText(
    "product-note",
    1,
    "# Product note\n\nWrite a one-page technical note for installers: a title, "
    "two or three short sections, plain sentences, each backed by the sources.",
)
TOPICS = [
    "updating the firmware",
    "connecting sensors to the RS-485 bus",
    "powering the AX-200 gateway",
    "network configuration and default IP address",
    "alarm thresholds and sampling interval",
]
WORKERS = Workers(HOME, WORKER_ENV)


def use_broker(url: str | None) -> None:
    app.conf.update(broker_url=url or "", result_backend=url, task_always_eager=url is None)
    app._backend_cache = None
    app._local.__dict__.pop("backend", None)
    app._after_fork()


def row(run: GenerationRun, seconds: float) -> dict[str, Any]:
    return {
        "topic": run.topic,
        "status": run.status,
        "s": round(seconds, 1),
        "attempts": run.attempts,
        "completion_tokens": run.completion_tokens,
        "generate_ms": run.timings.get("generate"),
        "grounding_ms": run.timings.get("grounding"),
        "kept": run.sentences_kept,
        "error": (run.error or {}).get("message", ""),
    }


def in_process(topic: str) -> dict[str, Any]:
    run = generation_run_create(topic=topic, spec=SPEC, output_path=str(HOME / "out" / f"ip-{time.time_ns()}.md"))
    start = time.monotonic()
    generation_run_execute(run_id=run.pk)
    return row(GenerationRun.objects.get(pk=run.pk), time.monotonic() - start)


def brokered(topic: str, *, kill_in: str | None = None) -> dict[str, Any]:
    """Submit a run, wait for it to finish; with ``kill_in`` SIGKILL that worker once the run reaches 'generate'."""
    run = generation_run_create(topic=topic, spec=SPEC, output_path=str(HOME / "out" / f"b-{time.time_ns()}.md"))
    start = time.monotonic()
    generate_document.delay(run.pk)
    extra: dict[str, Any] = {}
    while (run := GenerationRun.objects.get(pk=run.pk)).status not in ("succeeded", "needs_review", "failed"):
        if kill_in and run.stage == "generate" and not extra:
            WORKERS.kill(kill_in)
            killed = time.monotonic()
            extra = {"killed_after_s": round(killed - start, 1), "restart_s": round(WORKERS.start(kill_in), 1)}
        time.sleep(0.1)
    if extra:
        extra["kill_to_done_s"] = round(time.monotonic() - killed, 1)
    return {**row(run, time.monotonic() - start), **extra}


def main() -> None:
    call_command("migrate", verbosity=0)
    client = redis.Redis.from_url(OPTS.redis)
    client.flushdb()
    topics = TOPICS[: OPTS.topics]
    out: dict[str, Any] = {"cpus": os.cpu_count(), "stale_seconds": int(STALE), "load_before": os.getloadavg()}
    try:
        knowledge_base_ingest(target=REPO / "knowledge_base")
        out["in_process_cold"] = in_process(topics[0])  # loads both models in this process
        out["in_process"] = [in_process(topic) for topic in topics]
        out["load_mid"] = os.getloadavg()
        use_broker(OPTS.redis)
        out["worker_ready_s"] = {"db": round(WORKERS.start("db"), 1), "compute": round(WORKERS.start("compute"), 1)}
        out["broker_cold"] = brokered(topics[0])  # loads the models in the workers
        out["broker"] = [brokered(topic) for topic in topics]
        out["kill_compute_mid_generation"] = brokered(topics[0], kill_in="compute")
        out["load_after"] = os.getloadavg()
    finally:
        WORKERS.kill_all()
        client.flushdb()
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
