"""Sources with lettered lists are re-chunked by the next ingest.

A list lettered "a)", "b)" is now read a step at a time, as a numbered one is: its items are sentences of their own
in the chunks' sentence windows, and a list too long for one chunk is cut between its items, its heading standing
above the rest of it in the next chunk (0024). The sources with a chunk holding a line that opens a lettered item get
``letter_lists=prose`` in their recorded chunking settings, a key the configured settings do not have, so the next
ingest re-chunks them (as 0024 did). Nothing is deleted: the old chunks stay searchable until then.
"""

from __future__ import annotations

from typing import Any

from django.db import migrations
from django.db.models import Value
from django.db.models.functions import Concat

MARK = " letter_lists=prose"
# Read alike by SQLite's REGEXP (Python's re) and PostgreSQL's ``~``: a line opening with "b) " or "c. ".
LETTERED = r"(^|\n)[ \t]*[a-z][.)][ \t]"


def mark_sources(apps: Any, schema_editor: Any) -> None:
    Source = apps.get_model("sources", "Source")
    Chunk = apps.get_model("sources", "Chunk")
    lettered = Chunk.objects.filter(text__regex=LETTERED).values("source_id")
    Source.objects.filter(pk__in=lettered).exclude(chunking="").exclude(chunking__contains=MARK).update(
        chunking=Concat("chunking", Value(MARK))
    )


def unmark_sources(apps: Any, schema_editor: Any) -> None:
    Source = apps.get_model("sources", "Source")
    for pk, chunking in Source.objects.filter(chunking__contains=MARK).values_list("pk", "chunking"):
        Source.objects.filter(pk=pk).update(chunking=chunking.replace(MARK, ""))


class Migration(migrations.Migration):
    dependencies = [("sources", "0024_list_heads")]

    operations = [migrations.RunPython(mark_sources, unmark_sources)]
