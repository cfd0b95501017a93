"""Sources whose numbered lists were cut by a chunk boundary are re-chunked by the next ingest.

A chunk that goes on with a numbered list, or opens it, under a heading that stands in the chunk before (a line
ending in a colon, a label, a sentence standing alone above the steps) now starts with that heading again
(``core.units.continued_head``), and a list item is never cut after its number ("7." in one chunk, "Check …" in the
next). The sources with a chunk after their first that opens with a numbered item, or ends with a bare item number,
get ``list_heads=cut`` in their recorded chunking settings, a key the configured settings do not have, so the next
ingest re-chunks them (as 0023 did). Nothing is deleted: the old chunks stay searchable until then.
"""

from __future__ import annotations

from typing import Any

from django.db import migrations
from django.db.models import Value
from django.db.models.functions import Concat

MARK = " list_heads=cut"
# Read alike by SQLite's REGEXP (Python's re) and PostgreSQL's ``~``: a chunk opening with "3. " or "b) ",
# or ending with a line that is only an item's number.
CUT = r"^\s*[0-9]{1,3}[.)]\s|\n\s*[0-9]{1,3}[.)]$"


def mark_sources(apps: Any, schema_editor: Any) -> None:
    Source = apps.get_model("sources", "Source")
    Chunk = apps.get_model("sources", "Chunk")
    cut = Chunk.objects.filter(ordinal__gt=0, text__regex=CUT).values("source_id")
    Source.objects.filter(pk__in=cut).exclude(chunking="").exclude(chunking__contains=MARK).update(
        chunking=Concat("chunking", Value(MARK))
    )


def unmark_sources(apps: Any, schema_editor: Any) -> None:
    Source = apps.get_model("sources", "Source")
    for pk, chunking in Source.objects.filter(chunking__contains=MARK).values_list("pk", "chunking"):
        Source.objects.filter(pk=pk).update(chunking=chunking.replace(MARK, ""))


class Migration(migrations.Migration):
    dependencies = [("sources", "0023_html_lists")]

    operations = [migrations.RunPython(mark_sources, unmark_sources)]
