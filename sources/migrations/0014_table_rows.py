"""Sources whose chunks hold table rows written as cells are re-chunked by the next ingest: a block longer than a
chunk is no longer cut inside a table's row.

The chunker took a PDF table's rows (0013), or a Markdown table's in a text file, for one long sentence, and cut a
block that did not fit a chunk between words or at the "." of "Number of sensors | max. 8": a row's value went to
the next chunk without its name. Now a table stays in one piece when it fits and is otherwise cut between rows. The
PDF, Markdown and text sources with a chunk holding a ``|`` get ``table_rows=cut`` in their recorded chunking settings,
a key the configured settings do not have, so the next ingest re-chunks them (as 0006 and 0010–0013 did); a table of
an Office file, an HTML page or a sheet is a block a row and is unchanged. Nothing is deleted: the old chunks stay
searchable until then.
"""

from __future__ import annotations

from typing import Any

from django.db import migrations
from django.db.models import Value
from django.db.models.functions import Concat

ROWS_MARK = " table_rows=cut"


def mark_sources(apps: Any, schema_editor: Any) -> None:
    Source = apps.get_model("sources", "Source")
    Chunk = apps.get_model("sources", "Chunk")
    with_rows = Chunk.objects.filter(text__contains="|").values("source_id")
    (
        Source.objects.filter(kind__in=("pdf", "md", "txt"), pk__in=with_rows)
        .exclude(chunking="")
        .exclude(chunking__contains=ROWS_MARK)
        .update(chunking=Concat("chunking", Value(ROWS_MARK)))
    )


def unmark_sources(apps: Any, schema_editor: Any) -> None:
    Source = apps.get_model("sources", "Source")
    for pk, chunking in Source.objects.filter(chunking__contains=ROWS_MARK).values_list("pk", "chunking"):
        Source.objects.filter(pk=pk).update(chunking=chunking.replace(ROWS_MARK, ""))


class Migration(migrations.Migration):
    dependencies = [
        ("sources", "0013_pdf_tables"),
    ]

    operations = [migrations.RunPython(mark_sources, unmark_sources)]
