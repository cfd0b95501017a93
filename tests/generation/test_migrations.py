from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from generation.models import GenerationRun, QueryLog


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


@pytest.mark.django_db(transaction=True)
def test_query_log_rows_and_audit_grants_written_under_retrieval_are_read_through_generation() -> None:
    before = [("retrieval", "0008_conversation"), ("generation", "0006_run_needs_review")]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    try:
        old = executor.loader.project_state(before).apps
        user = old.get_model("auth", "User").objects.create(username="auditor")
        grant = old.get_model("auth", "Permission").objects.get(
            codename="view_querylog", content_type__app_label="retrieval"
        )
        user.user_permissions.add(grant)
        chat = old.get_model("retrieval", "Conversation").objects.create(owner=user, title="first question")
        row = old.get_model("retrieval", "QueryLog")(
            run_id="r1", user=user, question="Q?", mode="bm25", conversation=chat
        )
        row.save(force_insert=True)  # historical models have no append-only guard
        old.get_model("retrieval", "QueryFeedback").objects.create(query=row, user=user, verdict="correct")
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
    moved = QueryLog.objects.get(run_id="r1")
    assert moved.conversation.title == "first question" and list(moved.conversation.turns.all()) == [moved]
    assert [f.verdict for f in moved.feedback.all()] == ["correct"]
    assert get_user_model().objects.get(username="auditor").has_perm("generation.view_querylog")
    labels = ContentType.objects.filter(model__in=["conversation", "querylog", "queryfeedback"])
    assert sorted(labels.values_list("app_label", flat=True)) == ["generation"] * 3
