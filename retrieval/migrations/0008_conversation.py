"""Conversations: a run of questions whose turns are query-log rows (QueryLog.conversation).

The column is nullable with no default, so Django's SQLite schema editor adds it with
``ALTER TABLE ... ADD COLUMN`` (no rebuild of the audit table).
"""

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("retrieval", "0007_querylog_message"),
        ("sources", "0007_source_summary_names"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="Conversation",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("title", models.CharField(editable=False, help_text="The first question, shortened.", max_length=200)),
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
                    "owner",
                    models.ForeignKey(
                        editable=False,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="conversations",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "ordering": ["-updated_at", "-pk"],
                "indexes": [models.Index(fields=["owner", "updated_at"], name="conversation_owner_updated")],
            },
        ),
        migrations.AddField(
            model_name="querylog",
            name="conversation",
            field=models.ForeignKey(
                blank=True,
                editable=False,
                help_text="The conversation this question was a turn of.",
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="turns",
                to="retrieval.conversation",
            ),
        ),
    ]
