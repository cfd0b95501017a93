"""Text and Markdown sources titled or headed by a decoration line are re-chunked by the next ingest.

A file framed by a rule drawn as a heading (``# ====…``, as configuration files and scripts open) was titled, in
Markdown, by the rule itself: 76 "=" signs, the heading of every chunk under it, so every citation of it read
"§ ====…". A text file so framed was titled by its file name, though the heading inside the frame names it. Now a
decoration line is neither title nor heading (``core.units.is_decoration``, ``text_title``). The sources whose
title or a chunk's heading is a decoration, and the text sources whose first chunk gives another title now, get
``title_decoration=kept`` in their recorded chunking settings, a key the configured settings do not have, so the
next ingest re-chunks them (as 0006 and 0010–0015 did). Nothing is deleted: the old chunks stay searchable until
then.
"""

from __future__ import annotations

from typing import Any

from django.db import migrations
from django.db.models import Value
from django.db.models.functions import Concat

from core.units import is_decoration, text_title

DECORATION_MARK = " title_decoration=kept"


def _decorated(title: str, headings: list[str]) -> bool:
    return is_decoration(title) or any(is_decoration(part) for h in headings for part in h.split(" > "))


def mark_sources(apps: Any, schema_editor: Any) -> None:
    Source = apps.get_model("sources", "Source")
    Chunk = apps.get_model("sources", "Chunk")
    # A text file 0012 marked is titled anew by the next ingest already.
    candidates = (
        Source.objects.filter(kind__in=("txt", "md"))
        .exclude(chunking="")
        .exclude(chunking__contains=DECORATION_MARK)
        .exclude(chunking__contains=" txt_title=")
    )
    marked = []
    for pk, kind, title in candidates.values_list("pk", "kind", "title"):
        chunks = Chunk.objects.filter(source_id=pk).order_by("ordinal")
        headings = list(chunks.exclude(heading="").values_list("heading", flat=True).distinct())
        first = chunks.values_list("text", flat=True).first() or ""
        retitled = kind == "txt" and (new := text_title(first)) != "" and new != title
        if retitled or _decorated(title, headings):
            marked.append(pk)
    Source.objects.filter(pk__in=marked).update(chunking=Concat("chunking", Value(DECORATION_MARK)))


def unmark_sources(apps: Any, schema_editor: Any) -> None:
    Source = apps.get_model("sources", "Source")
    for pk, chunking in Source.objects.filter(chunking__contains=DECORATION_MARK).values_list("pk", "chunking"):
        Source.objects.filter(pk=pk).update(chunking=chunking.replace(DECORATION_MARK, ""))


class Migration(migrations.Migration):
    dependencies = [
        ("sources", "0017_pdf_furniture_positions"),
    ]

    operations = [migrations.RunPython(mark_sources, unmark_sources)]
