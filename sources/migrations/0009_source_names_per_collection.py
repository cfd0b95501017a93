"""Source.name qualified only among the folders of its own collection.

Before, a file was cited with its folder in front as soon as any collection had a file at the same path, so the
readers of one collection saw their citations change with the files of a collection they may not read.
"""

from __future__ import annotations

from typing import Any

from django.db import migrations, models

from sources.models import cited_names


def name_per_collection(apps: Any, schema_editor: Any) -> None:
    Source = apps.get_model("sources", "Source")
    roots_of: dict[tuple[int, str], dict[str, int]] = {}
    for pk, collection_id, root, path in Source.objects.values_list("pk", "collection_id", "root", "path").iterator():
        roots_of.setdefault((collection_id, path), {})[root] = pk
    for (_, path), pk_of in roots_of.items():
        for root, name in cited_names(path, list(pk_of)).items():
            Source.objects.filter(pk=pk_of[root]).exclude(name=name).update(name=name)


class Migration(migrations.Migration):
    dependencies = [
        ("sources", "0008_collection_folder"),
    ]

    operations = [
        # The help text only: no table rebuild, which the FTS triggers on sources_source break (see 0003).
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="source",
                    name="name",
                    field=models.CharField(
                        editable=False,
                        help_text="How citations name the file: its path, with the folder it was ingested from in "
                        "front while another folder of its collection has a file at the same path.",
                        max_length=2048,
                    ),
                )
            ]
        ),
        migrations.RunPython(name_per_collection, migrations.RunPython.noop),
    ]
