"""Sources whose chunks hold table rows are re-chunked by the next ingest: a table's rows count as the sentences of
the chunk's sentence windows.

A chunk is found by its best sentence window as well as by its whole text. A table held no sentence end, so it was
one long "sentence": a fact in one row of a long table ("Terminals | … torque 0.5 Nm") was embedded only inside the
whole table, and "What is the tightening torque of the screw terminals?" was refused at the gate. Now each row is a
sentence of the windows. The sources with a chunk holding a ``|`` (a table of any format: PDF, Markdown, Office,
HTML, sheets) get ``table_windows=whole`` in their recorded chunking settings, a key the configured settings do not
have, so the next ingest re-chunks and re-embeds them (as 0006 and 0010–0014 did). Nothing is deleted: the old
chunks and windows stay searchable until then.
"""

from __future__ import annotations

from typing import Any

from django.db import migrations
from django.db.models import Value
from django.db.models.functions import Concat

WINDOWS_MARK = " table_windows=whole"


def mark_sources(apps: Any, schema_editor: Any) -> None:
    Source = apps.get_model("sources", "Source")
    Chunk = apps.get_model("sources", "Chunk")
    with_rows = Chunk.objects.filter(text__contains="|").values("source_id")
    (
        Source.objects.filter(pk__in=with_rows)
        .exclude(chunking="")
        .exclude(chunking__contains=WINDOWS_MARK)
        .update(chunking=Concat("chunking", Value(WINDOWS_MARK)))
    )


def unmark_sources(apps: Any, schema_editor: Any) -> None:
    Source = apps.get_model("sources", "Source")
    for pk, chunking in Source.objects.filter(chunking__contains=WINDOWS_MARK).values_list("pk", "chunking"):
        Source.objects.filter(pk=pk).update(chunking=chunking.replace(WINDOWS_MARK, ""))


class Migration(migrations.Migration):
    dependencies = [
        ("sources", "0014_table_rows"),
    ]

    operations = [migrations.RunPython(mark_sources, unmark_sources)]
