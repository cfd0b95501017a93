"""Generation runs through a real Redis broker and real Celery workers (subprocesses) with the real local model.

A ``compute`` worker (FOUNDRY_COMPUTE_ONLY=1: no database at all) does the model
call and the grounding; a ``db`` worker claims, retrieves, stores and sweeps.
Needs Redis (see tests/broker.py); skips with a message without one, except in CI.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

from generation.documents import SpecText
from generation.models import GenerationRun
from generation.pipeline import generation_run_create
from generation.tasks import generate_document
from sources.services.ingest_jobs import knowledge_base_ingest
from tests.broker import Worker, broker_mode, redis_or_skip, worker_env, worker_pool
from tests.sources.test_tasks_broker import clean_index  # noqa: F401 (a fixture)

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

# Longer than the longest quiet stretch of a live run on 2 busy cores: a fresh
# compute worker loads the chat model and writes up to 300 tokens between two
# heartbeats, then loads the embedding model for grounding before the store.
STALE_SECONDS = 40
WORKER_CONFIG = """\
ingest:
  summary_model: none
embedding:
  context_model: none
retrieval:
  hyde: false
  scorer_model: none
generation:
  model: local/smollm2-135m
  max_document_tokens: 300
"""
SPEC = SpecText(
    "product-note",
    1,
    "# Product note\n\nWrite a one-page technical note for installers: a title, "
    "two or three short sections, plain sentences, each backed by the sources.",
)
# SmolLM2-135M's document depends on the passages it is given and on the CPU's float rounding; on
# the sample knowledge base it kept supported sentences for this topic (docs/benchmarks.md).
TOPIC = "installing the AX-200 gateway"
FINISHED = (GenerationRun.Status.SUCCEEDED, GenerationRun.Status.NEEDS_REVIEW, GenerationRun.Status.FAILED)


@pytest.fixture(scope="module")
def workers(tmp_path_factory: pytest.TempPathFactory, django_db_setup: Any) -> Iterator[dict[str, Worker]]:
    """A compute worker (no database) and a db worker with the sweeper schedule."""
    redis_or_skip()
    home = tmp_path_factory.mktemp("broker-gen-home")
    env = worker_env(
        home,
        config=WORKER_CONFIG,
        FOUNDRY_JOB_STALE_SECONDS=str(STALE_SECONDS),
        FOUNDRY_SWEEP_INTERVAL="2",
        FOUNDRY_TASK_MAX_DELIVERIES="2",
        FOUNDRY_TASK_RETRY_BACKOFF="1",
    )
    with worker_pool(home, env) as pool:
        yield pool


@pytest.fixture
def sample_kb(foundry_config: Any, clean_index: None) -> Path:  # noqa: F811
    """The sample knowledge base, indexed here with the same embedding model the workers use."""
    foundry_config(ingest={"summary_model": "none"}, embedding={"context_model": "none"})
    root = Path(settings.BASE_DIR) / "knowledge_base"
    report = knowledge_base_ingest(target=root)
    assert report.as_dict()["ingested"] >= 3
    return root


def submit(tmp_path: Path, spec: SpecText = SPEC, topic: str = TOPIC, name: str = "note.md") -> GenerationRun:
    """A pending run sent to the db queue, as ``foundry generate`` and the web form do."""
    run = generation_run_create(topic=topic, spec=spec, output_path=str(tmp_path / "out" / name))
    generate_document.delay(run.pk)
    return run


def follow(
    run_id: int, timeout: float, workers: dict[str, Worker], *, until: str | None = None
) -> tuple[GenerationRun, list[str]]:
    """Poll the run (every 0.1 s) until it is finished, or reaches stage ``until``; return it and the stages seen."""
    deadline = time.monotonic() + timeout
    stages: list[str] = []
    while time.monotonic() < deadline:
        run = GenerationRun.objects.get(pk=run_id)
        if not stages or stages[-1] != run.stage:
            stages.append(run.stage)
        if run.status in FINISHED or (until and run.stage == until):
            return run, stages
        time.sleep(0.1)
    raise AssertionError(
        f"run {run_id} not there after {timeout}s: {run.status}/{run.stage}, stages {stages}\n"
        f"{workers['compute'].tail()}\n{workers['db'].tail()}"
    )


def assert_complete_document(run: GenerationRun) -> None:
    """Exactly one document in the output folder, whole: title, footnotes 1..n all defined, no temp file."""
    out = Path(run.output_path)
    assert sorted(p.name for p in out.parent.iterdir()) == [out.name], "a partial or extra file was left"
    text = out.read_text()
    assert text.startswith("# ") and "\n## Sources\n" in text and text.endswith("\n")
    used = sorted({int(n) for n in re.findall(r"\[\^(\d+)\](?!:)", text)})
    defined = [int(n) for n in re.findall(r"^\[\^(\d+)\]: \S+", text, re.MULTILINE)]
    assert used == defined == list(range(1, len(defined) + 1)) and defined


def test_two_workers_on_different_queues_serve_a_run(
    workers: dict[str, Worker], sample_kb: Path, tmp_path: Path
) -> None:
    with broker_mode():
        run = submit(tmp_path)
        run, stages = follow(run.pk, 300, workers)
    assert run.status == ("needs_review" if run.low_confidence else "succeeded"), run.error
    assert stages[-1] == "done" and "generate" in stages  # reported by the compute worker, stored by the db worker
    assert run.attempts == 1 and run.llm_calls == 1 and 0 < run.sentences_kept <= run.sentences_total
    assert_complete_document(run)
    # "Task <name>[<id>] received": what each worker ran (the start-up banner lists every task by name alone).
    compute_log, db_log = workers["compute"].since_start(), workers["db"].since_start()
    assert "generation.tasks.generate_compute[" in compute_log and "generation.tasks.generate_compute[" not in db_log
    for name in ("generate_document", "generate_progress", "generate_store"):
        assert f"generation.tasks.{name}[" in db_log and f"generation.tasks.{name}[" not in compute_log


def test_run_survives_a_compute_worker_kill(workers: dict[str, Worker], sample_kb: Path, tmp_path: Path) -> None:
    with broker_mode():
        run = submit(tmp_path)
        run, _ = follow(run.pk, 300, workers, until="generate")
        assert run.status == "running", f"the run ended before the kill: {run.status} {run.error}"
        workers["compute"].kill()  # mid-way through the model call
        killed_at = time.monotonic()
        workers["compute"].start()
        workers["compute"].wait_ready()
        run, stages = follow(run.pk, 300, workers)
        recovery = time.monotonic() - killed_at
    print(
        f"\ngeneration run complete {recovery:.1f}s after the compute worker was killed; "
        f"attempts={run.attempts}, stages after the restart: {stages}"
    )
    assert run.status == ("needs_review" if run.low_confidence else "succeeded"), run.error
    assert run.attempts == 2 and run.stage == "done" and run.llm_calls == 1
    assert_complete_document(run)
    assert "re-queued as stale" in workers["db"].tail() or "re-queued as stale" in workers["db"].log.read_text()
    assert not GenerationRun.objects.exclude(status__in=FINISHED).exists()


def test_poison_runs_fail_alone_with_their_reasons(workers: dict[str, Worker], sample_kb: Path, tmp_path: Path) -> None:
    bad_model = SpecText("bad-model", 1, SPEC.body + "\n<!-- poison-model -->\n")
    crash = SpecText("crash", 1, SPEC.body + "\n<!-- poison-crash -->\n")
    with broker_mode():
        runs = {
            "crash": submit(tmp_path, crash, name="crash.md"),
            "bad-model": submit(tmp_path, bad_model, name="bad-model.md"),
            "good": submit(tmp_path, name="good.md"),
        }
        done = {key: follow(run.pk, 400, workers)[0] for key, run in runs.items()}
    assert done["good"].wrote_document, done["good"].error
    assert done["bad-model"].status == "failed" and done["bad-model"].error["transient"] is False
    assert "unknown local chat model 'no-such-model'" in done["bad-model"].error["message"]
    assert done["crash"].status == "failed" and done["crash"].error["type"] == "PoisonTask"
    assert done["crash"].error["message"].startswith("PoisonTask: the worker process died 2 times")
    out = Path(done["good"].output_path).parent
    assert sorted(p.name for p in out.iterdir()) == ["good.md"]
    assert all(run.stage == "done" for run in done.values())
