from __future__ import annotations

from django.apps import AppConfig


def _requeue_run(run_id: int) -> None:
    from generation.tasks import generate_document

    generate_document.delay(run_id)


def _run_failed(run_id: int) -> None:
    """The sweeper failed the run (we are in its transaction): chain it, then drop its queued messages."""
    from generation.audit_chain import run_chain
    from generation.pipeline import generation_run_dropped

    run_chain(run_id=run_id)
    generation_run_dropped(run_id=run_id)


class GenerationConfig(AppConfig):
    name = "generation"

    def ready(self) -> None:
        # A run whose worker died is re-queued (the run is claimed again from pending),
        # and failed with the reason after FOUNDRY_JOB_MAX_ATTEMPTS: nothing stays running forever.
        from core.jobs import register_stale_sweep
        from generation.models import GenerationRun

        register_stale_sweep(GenerationRun, _requeue_run, _run_failed)
