"""Text sources are re-chunked by the next ingest: a text file's first line is now its title when it names the file.

A text file was titled by its file name ("release-notes"), though its first line often names it ("Aurora AX-200
Sensor Gateway - Firmware Release Notes"). The title is searched with every chunk and read with every passage of
the file, so a question that names it ("which firmware …") found the file's passages less often. A text source
whose first line (its first chunk's) names it, under another title, gets ``txt_title=name`` in its recorded
chunking settings, a key the configured settings do not have, so the next ingest re-chunks it (as 0006, 0010 and
0011 did). Nothing is deleted: the old chunks stay searchable until then.
"""

from __future__ import annotations

from typing import Any

from django.db import migrations
from django.db.models import Value
from django.db.models.functions import Concat

from core.units import title_line

TITLE_MARK = " txt_title=name"


def mark_texts(apps: Any, schema_editor: Any) -> None:
    Source = apps.get_model("sources", "Source")
    Chunk = apps.get_model("sources", "Chunk")
    texts = Source.objects.filter(kind="txt").exclude(chunking="").exclude(chunking__contains=TITLE_MARK)
    retitled = [
        pk
        for pk, title in texts.values_list("pk", "title")
        if (first := Chunk.objects.filter(source_id=pk).order_by("ordinal").values_list("text", flat=True).first())
        and (line := title_line(first))
        and line != title
    ]
    Source.objects.filter(pk__in=retitled).update(chunking=Concat("chunking", Value(TITLE_MARK)))


def unmark_texts(apps: Any, schema_editor: Any) -> None:
    Source = apps.get_model("sources", "Source")
    for pk, chunking in Source.objects.filter(chunking__contains=TITLE_MARK).values_list("pk", "chunking"):
        Source.objects.filter(pk=pk).update(chunking=chunking.replace(TITLE_MARK, ""))


class Migration(migrations.Migration):
    dependencies = [
        ("sources", "0011_pdf_running_lines"),
    ]

    operations = [migrations.RunPython(mark_texts, unmark_texts)]
