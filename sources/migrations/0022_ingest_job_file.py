"""The files of an ingest job that are with the workers (``IngestJobFile``), each with its own heartbeat.

A compute worker killed mid-file used to be noticed only once the job's other files were done and the
whole job fell silent; now the sweeper sees that one file's worker stop reporting and sends just that
file again. A new table: nothing existing changes.
"""

from __future__ import annotations

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("sources", "0021_source_issued"),
    ]

    operations = [
        migrations.CreateModel(
            name="IngestJobFile",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("path", models.CharField(editable=False, max_length=1024)),
                (
                    "attempts",
                    models.PositiveIntegerField(default=1, editable=False, help_text="How often the file was sent."),
                ),
                ("beat_at", models.DateTimeField(blank=True, editable=False, null=True)),
                (
                    "job",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="files_in_flight",
                        to="sources.ingestjob",
                    ),
                ),
            ],
            options={
                "indexes": [models.Index(fields=["beat_at"], name="sources_ing_beat_at_82a9b1_idx")],
                "constraints": [models.UniqueConstraint(fields=("job", "path"), name="ingest_job_file_once")],
            },
        ),
    ]
