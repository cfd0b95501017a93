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
            "generation", "GenerationRun")
        for coverage, status in ((0.5, "succeeded"), (0.95, "succeeded"), (None, "succeeded"), (0.5, "failed")):
            OldRun.objects.create(topic=f"{coverage} {status}", spec_name="s", spec_version=1, spec_body="",
                                  coverage=coverage, status=status)
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
    marked = dict(GenerationRun.objects.values_list("topic", "low_confidence"))
    assert marked == {"0.5 succeeded": True, "0.95 succeeded": False, "None succeeded": False, "0.5 failed": False}
