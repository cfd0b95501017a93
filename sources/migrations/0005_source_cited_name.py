"""Source.name: how citations name a file, its path qualified by its folder while another folder has the same path.

Before, two folders ingested with a ``manual.pdf`` each were both cited as ``manual.pdf``.
"""

from __future__ import annotations

from typing import Any

from django.db import migrations, models

from sources.models import cited_names

FIELD = models.CharField(
    editable=False,
    max_length=2048,
    help_text="How citations name the file: its path, with the folder it was ingested from in front while "
    "another folder has a file at the same path.",
)


def name_existing(apps: Any, schema_editor: Any) -> None:
    Source = apps.get_model("sources", "Source")
    roots_of: dict[str, dict[str, int]] = {}
    for pk, root, path in Source.objects.values_list("pk", "root", "path").iterator():
        roots_of.setdefault(path, {})[root] = pk
    for path, pk_of in roots_of.items():
        for root, name in cited_names(path, list(pk_of)).items():
            Source.objects.filter(pk=pk_of[root]).update(name=name)


class Migration(migrations.Migration):
    dependencies = [
        ("sources", "0004_json_reextract"),
    ]

    operations = [
        # In place, not Django's table rebuild, which the FTS triggers on sources_source break (see 0003).
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(
                    sql="ALTER TABLE sources_source ADD COLUMN name varchar(2048) NOT NULL DEFAULT ''",
                    reverse_sql="ALTER TABLE sources_source DROP COLUMN name",
                )
            ],
            state_operations=[migrations.AddField(model_name="source", name="name", field=FIELD)],
        ),
        migrations.AddIndex(
            model_name="source", index=models.Index(fields=["path"], name="sources_sou_path_e17056_idx")
        ),
        migrations.RunPython(name_existing, migrations.RunPython.noop),
    ]
