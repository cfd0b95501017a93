"""The query log (QueryLog, Conversation, QueryFeedback), taken over from ``retrieval``.

State only: the tables keep their names (``retrieval_querylog``, ``retrieval_conversation``,
``retrieval_queryfeedback``) and every row. The models' content types move to ``generation`` too, so
the permissions granted on them (``view_querylog``: the auditors) and the admin's history follow.
"""

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models

MOVED = ("conversation", "querylog", "queryfeedback")


def _content_types_move(apps, schema_editor, *, source: str, target: str) -> None:
    ContentType = apps.get_model("contenttypes", "ContentType")
    rows = ContentType.objects.using(schema_editor.connection.alias)
    for model in MOVED:
        if not rows.filter(app_label=target, model=model).exists():
            rows.filter(app_label=source, model=model).update(app_label=target)


def content_types_to_generation(apps, schema_editor) -> None:
    _content_types_move(apps, schema_editor, source="retrieval", target="generation")


def content_types_to_retrieval(apps, schema_editor) -> None:
    _content_types_move(apps, schema_editor, source="generation", target="retrieval")


class Migration(migrations.Migration):
    dependencies = [
        ("contenttypes", "0002_remove_content_type_name"),
        ("generation", "0006_run_needs_review"),
        ("retrieval", "0009_query_log_to_generation"),
        ("sources", "0008_collection_folder"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="Conversation",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        (
                            "owner",
                            models.ForeignKey(
                                editable=False,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="conversations",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                        (
                            "collection",
                            models.ForeignKey(
                                blank=True,
                                editable=False,
                                help_text="The one collection its questions search; empty means every collection the owner can read when asking.",
                                null=True,
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="+",
                                to="sources.collection",
                            ),
                        ),
                        (
                            "title",
                            models.CharField(
                                editable=False, help_text="The first question, shortened.", max_length=200
                            ),
                        ),
                        ("created_at", models.DateTimeField(default=django.utils.timezone.now, editable=False)),
                        (
                            "updated_at",
                            models.DateTimeField(
                                db_index=True,
                                default=django.utils.timezone.now,
                                editable=False,
                                help_text="When its latest turn was asked.",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "retrieval_conversation",
                        "ordering": ["-updated_at", "-pk"],
                        "indexes": [models.Index(fields=["owner", "updated_at"], name="conversation_owner_updated")],
                    },
                ),
                migrations.CreateModel(
                    name="QueryLog",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("run_id", models.CharField(editable=False, max_length=40, unique=True)),
                        (
                            "kind",
                            models.CharField(
                                choices=[("answer", "Answer"), ("search", "Search (passages only, no answer)")],
                                default="answer",
                                editable=False,
                                help_text="A question answered (or refused), or a search that returned passages only.",
                                max_length=8,
                            ),
                        ),
                        (
                            "user",
                            models.ForeignKey(
                                blank=True,
                                editable=False,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="queries",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                        ("question", models.TextField(editable=False)),
                        (
                            "message",
                            models.TextField(
                                blank=True,
                                editable=False,
                                help_text="The asker's own words when they were a follow-up in a conversation; question is then the standalone question that was answered.",
                            ),
                        ),
                        (
                            "conversation",
                            models.ForeignKey(
                                blank=True,
                                editable=False,
                                help_text="The conversation this question was a turn of.",
                                null=True,
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="turns",
                                to="generation.conversation",
                            ),
                        ),
                        ("mode", models.CharField(editable=False, max_length=10)),
                        (
                            "collection_ids",
                            models.JSONField(
                                blank=True,
                                default=None,
                                editable=False,
                                help_text="Collections searched; null means every collection.",
                                null=True,
                            ),
                        ),
                        ("hyde_text", models.TextField(blank=True, editable=False)),
                        (
                            "channels",
                            models.JSONField(
                                default=dict, editable=False, help_text="Chunk ids and scores per channel."
                            ),
                        ),
                        ("gate", models.JSONField(default=dict, editable=False)),
                        (
                            "answer_class",
                            models.CharField(
                                blank=True,
                                choices=[
                                    ("normal", "Normal"),
                                    ("low_confidence", "Low confidence"),
                                    ("no_evidence", "No evidence"),
                                ],
                                editable=False,
                                max_length=16,
                            ),
                        ),
                        ("answer", models.TextField(blank=True, editable=False)),
                        ("citations", models.JSONField(default=list, editable=False)),
                        (
                            "grounding",
                            models.JSONField(
                                blank=True,
                                default=dict,
                                editable=False,
                                help_text="What the model wrote and the grounding check's verdict on each sentence (unsupported ones were withheld from the answer).",
                            ),
                        ),
                        ("conflicts", models.JSONField(default=list, editable=False)),
                        ("coverage", models.FloatField(blank=True, editable=False, null=True)),
                        (
                            "refusal",
                            models.CharField(
                                blank=True,
                                editable=False,
                                help_text="Why nothing was answered: gate, relevance, grounding or model.",
                                max_length=10,
                            ),
                        ),
                        ("prompt_tokens", models.PositiveIntegerField(default=0, editable=False)),
                        ("completion_tokens", models.PositiveIntegerField(default=0, editable=False)),
                        ("cost", models.FloatField(default=0.0, editable=False)),
                        ("llm_calls", models.PositiveIntegerField(default=0, editable=False)),
                        ("model", models.CharField(blank=True, editable=False, max_length=200)),
                        (
                            "timings",
                            models.JSONField(default=dict, editable=False, help_text="Milliseconds per stage."),
                        ),
                        (
                            "status",
                            models.CharField(
                                choices=[("ok", "Answered"), ("failed", "Failed")],
                                default="ok",
                                editable=False,
                                max_length=8,
                            ),
                        ),
                        ("error", models.TextField(blank=True, editable=False)),
                        ("cached", models.BooleanField(default=False, editable=False)),
                        (
                            "cache_key",
                            models.CharField(
                                blank=True,
                                db_index=True,
                                editable=False,
                                help_text="Question, scope, configuration and index version, hashed.",
                                max_length=64,
                            ),
                        ),
                        (
                            "created_at",
                            models.DateTimeField(db_index=True, default=django.utils.timezone.now, editable=False),
                        ),
                    ],
                    options={
                        "db_table": "retrieval_querylog",
                        "ordering": ["-created_at"],
                        "indexes": [
                            models.Index(fields=["answer_class"], name="retrieval_q_answer__2ba895_idx"),
                            models.Index(fields=["user", "created_at"], name="retrieval_q_user_id_6cdc4e_idx"),
                        ],
                    },
                ),
                migrations.CreateModel(
                    name="QueryFeedback",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        (
                            "query",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="feedback",
                                to="generation.querylog",
                            ),
                        ),
                        (
                            "user",
                            models.ForeignKey(
                                null=True, on_delete=django.db.models.deletion.SET_NULL, to=settings.AUTH_USER_MODEL
                            ),
                        ),
                        (
                            "verdict",
                            models.CharField(
                                choices=[("correct", "Correct"), ("incorrect", "Incorrect")], max_length=10
                            ),
                        ),
                        ("note", models.TextField(blank=True, max_length=4000)),
                        ("created_at", models.DateTimeField(default=django.utils.timezone.now, editable=False)),
                    ],
                    options={
                        "db_table": "retrieval_queryfeedback",
                        "ordering": ["-created_at"],
                    },
                ),
            ],
        ),
        migrations.RunPython(content_types_to_generation, content_types_to_retrieval),
    ]
