"""QueryLog.message: the raw follow-up message (``question`` holds the standalone question answered).

Added in place with ALTER TABLE: Django's SQLite schema editor would rebuild the whole table for a
NOT NULL column with a default, copying every audit row, and drop anything it does not model
(triggers, hand-made indexes). ``ADD COLUMN ... NOT NULL DEFAULT ''`` is a metadata-only change.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("retrieval", "0006_querylog_kind"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(
                    sql="ALTER TABLE retrieval_querylog ADD COLUMN message text NOT NULL DEFAULT ''",
                    reverse_sql="ALTER TABLE retrieval_querylog DROP COLUMN message",
                ),
            ],
            state_operations=[
                migrations.AddField(
                    model_name="querylog",
                    name="message",
                    field=models.TextField(
                        blank=True,
                        editable=False,
                        help_text="The asker's own words when they were a follow-up in a conversation; question is then the standalone question that was answered.",
                    ),
                ),
            ],
        ),
    ]
