from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from core.jobs import stale_runs_sweep
from generation.compute import PAYLOAD_VERSION, generation_run_compute
from generation.documents import SpecText
from generation.models import GenerationRun
from generation.pipeline import generation_run_create, generation_run_execute
from tests.broker import broker_mode, redis_flush, redis_or_skip
from tests.conftest import ScriptedLLM

pytestmark = pytest.mark.django_db

SPEC = SpecText("guide", 1, "# Guide\n\nWrite a guide.")


def orphan(tmp_path: Path, attempts: int) -> GenerationRun:
    """A run whose worker died mid-way: running, silent for an hour."""
    run = generation_run_create(topic="sensors on the RS-485 bus", spec=SPEC, output_path=str(tmp_path / "g.md"))
    GenerationRun.objects.filter(pk=run.pk).update(
        status="running", attempts=attempts, heartbeat_at=timezone.now() - timedelta(hours=1)
    )
    return run


def test_orphaned_run_is_requeued_and_completes(indexed: Path, tmp_path: Path, scripted_llm: ScriptedLLM) -> None:
    scripted_llm.reply = lambda m: "Up to 8 sensors can be connected to the RS-485 bus [S1]."
    run = orphan(tmp_path, attempts=1)
    actions = stale_runs_sweep(stale_after=timedelta(minutes=5), max_attempts=3)
    assert [(a.run_id, a.action) for a in actions if a.model == "generation.GenerationRun"] == [(run.pk, "requeued")]
    run.refresh_from_db()
    assert run.status == "succeeded" and run.attempts == 2 and (tmp_path / "g.md").exists()


def test_run_failing_repeatedly_is_failed_with_reason(indexed: Path, tmp_path: Path) -> None:
    run = orphan(tmp_path, attempts=3)
    stale_runs_sweep(stale_after=timedelta(minutes=5), max_attempts=3)
    run.refresh_from_db()
    assert run.status == "failed" and "no progress" in run.error["message"]


@pytest.mark.integration  # a real Redis: where the compute workers read what the sweeper decided
def test_compute_drops_what_is_still_queued_for_a_run_the_sweeper_failed(
    indexed: Path, tmp_path: Path, scripted_llm: ScriptedLLM
) -> None:
    redis_or_skip()
    run = orphan(tmp_path, attempts=3)  # three claims, each of which queued a compute message
    with broker_mode():
        redis_flush()
        stale_runs_sweep(stale_after=timedelta(minutes=5), max_attempts=3)
        assert GenerationRun.objects.get(pk=run.pk).status == "failed"
        late = generation_run_compute(payload={"v": PAYLOAD_VERSION, "run_id": run.pk, "attempt": 3})
    assert late["status"] == "duplicate" and scripted_llm.calls == []  # no model call for a failed run


def test_claim_counts_attempts(indexed: Path, tmp_path: Path, scripted_llm: ScriptedLLM) -> None:
    scripted_llm.reply = lambda m: "Up to 8 sensors can be connected to the RS-485 bus [S1]."
    run = generation_run_create(topic="sensors on the RS-485 bus", spec=SPEC, output_path=str(tmp_path / "h.md"))
    generation_run_execute(run_id=run.pk)
    assert GenerationRun.objects.get(pk=run.pk).attempts == 1
