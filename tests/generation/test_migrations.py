from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from generation.models import GenerationRun


@pytest.mark.django_db(transaction=True)
def test_runs_written_before_the_low_confidence_field_are_marked_by_the_configured_threshold() -> None:
    executor = MigrationExecutor(connection)
    executor.migrate([("generation", "0004_run_grounding")])
    try:
        OldRun = executor.loader.project_state([("generation", "0004_run_grounding")]).apps.get_model(
            "generation", "GenerationRun"
        )
        for coverage, status in ((0.5, "succeeded"), (0.95, "succeeded"), (None, "succeeded"), (0.5, "failed")):
            OldRun.objects.create(
                topic=f"{coverage} {status}",
                spec_name="s",
                spec_version=1,
                spec_body="",
                coverage=coverage,
                status=status,
            )
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
    marked = dict(GenerationRun.objects.values_list("topic", "low_confidence"))
    assert marked == {"0.5 succeeded": True, "0.95 succeeded": False, "None succeeded": False, "0.5 failed": False}


@pytest.mark.django_db(transaction=True)
def test_runs_written_with_low_confidence_become_needs_review_and_back() -> None:
    executor = MigrationExecutor(connection)
    executor.migrate([("generation", "0005_run_low_confidence")])
    try:
        OldRun = executor.loader.project_state([("generation", "0005_run_low_confidence")]).apps.get_model(
            "generation", "GenerationRun"
        )
        for low, status in ((True, "succeeded"), (False, "succeeded"), (True, "failed")):
            OldRun.objects.create(
                topic=f"{low} {status}", spec_name="s", spec_version=1, spec_body="", low_confidence=low, status=status
            )
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
    statuses = dict(GenerationRun.objects.values_list("topic", "status"))
    assert statuses == {"True succeeded": "needs_review", "False succeeded": "succeeded", "True failed": "failed"}
    executor = MigrationExecutor(connection)
    executor.migrate([("generation", "0005_run_low_confidence")])  # backwards: the old status set
    try:
        OldRun = executor.loader.project_state([("generation", "0005_run_low_confidence")]).apps.get_model(
            "generation", "GenerationRun"
        )
        assert dict(OldRun.objects.values_list("topic", "status"))["True succeeded"] == "succeeded"
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
