"""Sources with a paragraph or list cut into pieces are re-chunked by the next ingest.

A block too long for one chunk was cut on its sentences and the pieces joined with spaces, so a list cut in two
lost its line breaks: its items read as one unit, and a quote of one cited the whole chunk's lines. Pieces now
keep the block's text verbatim. Sources with a chunk that holds fewer line breaks than the lines it spans on one
page (a joined piece; also chunks whose lines lie further apart, JSON values and paragraphs apart, which re-chunk
to the same text) get ``split_text=joined`` in their recorded chunking settings, a key the configured settings do
not have, so the next ingest re-chunks them (as 0006 did for JSON sources). Nothing is deleted: the old chunks
stay searchable until then.
"""

from __future__ import annotations

from typing import Any

from django.db import migrations
from django.db.models import F, Q, Value
from django.db.models.functions import Concat

SPLIT_MARK = " split_text=joined"


def mark_joined(apps: Any, schema_editor: Any) -> None:
    Source, Chunk = apps.get_model("sources", "Source"), apps.get_model("sources", "Chunk")
    one_page = Q(page_start__isnull=True) | Q(page_start=F("page_end"))
    joined = {
        source_id
        for source_id, text, first, last in Chunk.objects.filter(one_page)
        .values_list("source_id", "text", "line_start", "line_end")
        .iterator()
        if text.count("\n") < last - first
    }
    (
        Source.objects.filter(pk__in=joined)
        .exclude(chunking="")
        .exclude(chunking__contains=SPLIT_MARK)
        .update(chunking=Concat("chunking", Value(SPLIT_MARK)))
    )


def unmark_joined(apps: Any, schema_editor: Any) -> None:
    Source = apps.get_model("sources", "Source")
    for pk, chunking in Source.objects.filter(chunking__contains=SPLIT_MARK).values_list("pk", "chunking"):
        Source.objects.filter(pk=pk).update(chunking=chunking.replace(SPLIT_MARK, ""))


class Migration(migrations.Migration):
    dependencies = [
        ("sources", "0009_source_names_per_collection"),
    ]

    operations = [migrations.RunPython(mark_joined, unmark_joined)]
