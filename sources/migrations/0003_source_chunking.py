"""Source.chunking: the chunking settings each source's chunks were built with.

Ingest now re-chunks a file whose recorded settings (``ingest.chunk_tokens``,
``ingest.chunk_overlap_tokens``, ``embedding.context_model``) differ from foundry.yaml.

Backfill. The rows that exist before this migration were built with whatever
foundry.yaml said at the time, and nobody recorded it. Every row that ingest wrote
(it records an embedding model) gets the string of the defaults of this release,
``chunk_tokens=200 chunk_overlap_tokens=0 context_model=none``; they are also what
the shipped foundry.yaml sets, chunk_tokens has been 200 since the first release,
and the overlap key did not exist before the release that added it. So:

- an install that never changed these keys (the common case) re-embeds nothing on
  its first ingest after the upgrade;
- an install that sets other values now is taken as built with the defaults: its
  first ingest re-chunks every source once (``foundry check`` lists them first).
  At worst that is a re-embed that was not needed, never old chunks kept silently;
- the one case left unseen: sources built with other values while foundry.yaml is
  back at the defaults (the very drift this field now catches). Their old chunks
  stay until the file changes, as they did before this migration.

The alternative, backfilling with the configuration read at migrate time, would make
the result depend on the environment the migration runs in and would bless exactly
the drift this field exists to catch. The string is a literal, not computed from the
current defaults: a later release that changes a default must not change what this
migration wrote. Rows without an embedding model (never built by ingest) stay "".
"""

from __future__ import annotations

from typing import Any

from django.db import migrations, models

BEFORE_RECORDED = "chunk_tokens=200 chunk_overlap_tokens=0 context_model=none"

FIELD = models.CharField(
    blank=True,
    editable=False,
    max_length=400,
    help_text="Chunking settings the chunks were built with (sources.services.chunking_settings); "
    "ingest re-chunks the file when foundry.yaml sets others.",
)


def backfill(apps: Any, schema_editor: Any) -> None:
    Source = apps.get_model("sources", "Source")
    Source.objects.exclude(embedding_model="").update(chunking=BEFORE_RECORDED)


class Migration(migrations.Migration):
    dependencies = [
        ("sources", "0002_ingest_job"),
    ]

    operations = [
        # Django's SQLite AddField of a NOT NULL column rebuilds the table (create a copy, drop,
        # rename). Dropping sources_source would drop retrieval's chunks_fts_title trigger with it,
        # and the rename fails on the chunks_fts_insert trigger that reads sources_source. SQLite
        # adds a NOT NULL column with a constant default in place, touching no trigger.
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(
                    sql="ALTER TABLE sources_source ADD COLUMN chunking varchar(400) NOT NULL DEFAULT ''",
                    reverse_sql="ALTER TABLE sources_source DROP COLUMN chunking",
                )
            ],
            state_operations=[migrations.AddField(model_name="source", name="chunking", field=FIELD)],
        ),
        # Reversing drops the column, so the backfill has nothing to undo.
        migrations.RunPython(backfill, migrations.RunPython.noop),
    ]
