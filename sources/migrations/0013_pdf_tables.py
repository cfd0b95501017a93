"""PDF sources are re-chunked by the next ingest: their tables' lines now keep their columns.

A PDF table's lines were read as words run together ("Power consumption (gateway only) - 2.5 4.0 W"), so the reader
quoted a header line ("Parameter Min. Typ. Max. Unit") alone or a row without its column names. PDF sources get
``pdf_tables=lines`` in their recorded chunking settings, a key the configured settings do not have, so the next
ingest re-chunks them (as 0006, 0010, 0011 and 0012 did). Nothing is deleted: the old chunks stay searchable until
then.
"""

from __future__ import annotations

from typing import Any

from django.db import migrations
from django.db.models import Value
from django.db.models.functions import Concat

TABLES_MARK = " pdf_tables=lines"


def mark_pdfs(apps: Any, schema_editor: Any) -> None:
    Source = apps.get_model("sources", "Source")
    (
        Source.objects.filter(kind="pdf")
        .exclude(chunking="")
        .exclude(chunking__contains=TABLES_MARK)
        .update(chunking=Concat("chunking", Value(TABLES_MARK)))
    )


def unmark_pdfs(apps: Any, schema_editor: Any) -> None:
    Source = apps.get_model("sources", "Source")
    for pk, chunking in Source.objects.filter(chunking__contains=TABLES_MARK).values_list("pk", "chunking"):
        Source.objects.filter(pk=pk).update(chunking=chunking.replace(TABLES_MARK, ""))


class Migration(migrations.Migration):
    dependencies = [
        ("sources", "0012_txt_title"),
    ]

    operations = [migrations.RunPython(mark_pdfs, unmark_pdfs)]
