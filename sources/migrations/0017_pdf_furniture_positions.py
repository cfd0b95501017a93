"""PDF sources are re-chunked by the next ingest: their furniture is found by where it stands, and their lines are
under the section they stand in.

A running header naming the chapter and its page ("Chapter 3: Objects, their modes and attributes 15") was kept
when its chapter had fewer than three pages with it, and so were page numbers; and every line of a page was under
the last section that starts on the page, though most stood in the one before. PDF sources get
``pdf_layout=lines`` in their recorded chunking settings, a key the configured settings do not have, so the next
ingest re-chunks them (as 0011 and 0013 did). Nothing is deleted: the old chunks stay searchable until then.
"""

from __future__ import annotations

from typing import Any

from django.db import migrations
from django.db.models import Value
from django.db.models.functions import Concat

LAYOUT_MARK = " pdf_layout=lines"


def mark_pdfs(apps: Any, schema_editor: Any) -> None:
    Source = apps.get_model("sources", "Source")
    (
        Source.objects.filter(kind="pdf")
        .exclude(chunking="")
        .exclude(chunking__contains=LAYOUT_MARK)
        .update(chunking=Concat("chunking", Value(LAYOUT_MARK)))
    )


def unmark_pdfs(apps: Any, schema_editor: Any) -> None:
    Source = apps.get_model("sources", "Source")
    for pk, chunking in Source.objects.filter(chunking__contains=LAYOUT_MARK).values_list("pk", "chunking"):
        Source.objects.filter(pk=pk).update(chunking=chunking.replace(LAYOUT_MARK, ""))


class Migration(migrations.Migration):
    dependencies = [
        ("sources", "0016_chunk_language"),
    ]

    operations = [migrations.RunPython(mark_pdfs, unmark_pdfs)]
