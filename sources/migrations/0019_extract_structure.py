"""PDF, Word, PowerPoint, Excel and HTML sources are re-chunked by the next ingest: their text is read anew.

A PDF's text is read with PDFium, not pypdf: words pypdf ran together are apart, ligatures are written out ("fi", not
"ﬁ") and two-column pages read column by column. Word list items read as Word numbers them ("1.", "a)", "2.1."), not
all as "-" bullets. A definition list (HTML ``<dl>``, or a two-column table without a header row) reads "term:
definition". Charts read as tables of their values. PDF sources get ``pdf_text=pypdf`` and the others
``structure=flat`` in their recorded chunking settings, keys the configured settings do not have, so the next ingest
re-chunks them (as 0017 and 0018 did). Nothing is deleted: the old chunks stay searchable until then.
"""

from __future__ import annotations

from typing import Any

from django.db import migrations
from django.db.models import Value
from django.db.models.functions import Concat

MARKS = {" pdf_text=pypdf": ("pdf",), " structure=flat": ("docx", "pptx", "xlsx", "html")}


def mark_sources(apps: Any, schema_editor: Any) -> None:
    Source = apps.get_model("sources", "Source")
    for mark, kinds in MARKS.items():
        (
            Source.objects.filter(kind__in=kinds)
            .exclude(chunking="")
            .exclude(chunking__contains=mark)
            .update(chunking=Concat("chunking", Value(mark)))
        )


def unmark_sources(apps: Any, schema_editor: Any) -> None:
    Source = apps.get_model("sources", "Source")
    for mark in MARKS:
        for pk, chunking in Source.objects.filter(chunking__contains=mark).values_list("pk", "chunking"):
            Source.objects.filter(pk=pk).update(chunking=chunking.replace(mark, ""))


class Migration(migrations.Migration):
    dependencies = [
        ("sources", "0018_decoration_titles"),
    ]

    operations = [migrations.RunPython(mark_sources, unmark_sources)]
