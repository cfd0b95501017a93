"""Project-wide periodic work (scheduled by celery beat on the db worker)."""

from __future__ import annotations

from celery import shared_task

from core.jobs import FoundryTask, retry_transient, stale_runs_sweep


@shared_task(base=FoundryTask, ignore_result=True)
@retry_transient
def sweep_stale_runs() -> int:
    """Re-queue or fail runs nobody works on (see ``stale_runs_sweep``). Safe to run anywhere, any number of times."""
    return len(stale_runs_sweep())
