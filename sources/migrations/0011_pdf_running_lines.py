"""PDF sources are re-chunked by the next ingest: their running headers and footers are now left out.

A PDF page's running header or footer ("… Datasheet - Rev. 2", "Page 1 of 3") was read as text: a chunk across a
page break held both in the middle of its paragraph, and the reader could quote them. PDF sources get
``pdf_running=kept`` in their recorded chunking settings, a key the configured settings do not have, so the next
ingest re-chunks them (as 0006 and 0010 did). Nothing is deleted: the old chunks stay searchable until then.
"""

from __future__ import annotations

from typing import Any

from django.db import migrations
from django.db.models import Value
from django.db.models.functions import Concat

RUNNING_MARK = " pdf_running=kept"


def mark_pdfs(apps: Any, schema_editor: Any) -> None:
    Source = apps.get_model("sources", "Source")
    (
        Source.objects.filter(kind="pdf")
        .exclude(chunking="")
        .exclude(chunking__contains=RUNNING_MARK)
        .update(chunking=Concat("chunking", Value(RUNNING_MARK)))
    )


def unmark_pdfs(apps: Any, schema_editor: Any) -> None:
    Source = apps.get_model("sources", "Source")
    for pk, chunking in Source.objects.filter(chunking__contains=RUNNING_MARK).values_list("pk", "chunking"):
        Source.objects.filter(pk=pk).update(chunking=chunking.replace(RUNNING_MARK, ""))


class Migration(migrations.Migration):
    dependencies = [
        ("sources", "0010_split_text"),
    ]

    operations = [migrations.RunPython(mark_pdfs, unmark_pdfs)]
