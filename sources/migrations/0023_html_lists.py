"""HTML sources are re-chunked by the next ingest: a list item reads with the bullet or number a browser draws.

An ``<ol>``'s items read "1." "2." … as the page numbers them (its ``start``, ``reversed``, ``type``, an item's
``value``), and an item whose text is in a ``<p>`` keeps its bullet, so a procedure is quoted with its own numbers.
HTML sources get ``html_lists=bare`` in their recorded chunking settings, a key the configured settings do not have,
so the next ingest re-chunks them (as 0019 did). Nothing is deleted: the old chunks stay searchable until then.
"""

from __future__ import annotations

from typing import Any

from django.db import migrations
from django.db.models import Value
from django.db.models.functions import Concat

MARK = " html_lists=bare"


def mark_sources(apps: Any, schema_editor: Any) -> None:
    Source = apps.get_model("sources", "Source")
    Source.objects.filter(kind="html").exclude(chunking="").exclude(chunking__contains=MARK).update(
        chunking=Concat("chunking", Value(MARK))
    )


def unmark_sources(apps: Any, schema_editor: Any) -> None:
    Source = apps.get_model("sources", "Source")
    for pk, chunking in Source.objects.filter(chunking__contains=MARK).values_list("pk", "chunking"):
        Source.objects.filter(pk=pk).update(chunking=chunking.replace(MARK, ""))


class Migration(migrations.Migration):
    dependencies = [("sources", "0022_ingest_job_file")]

    operations = [migrations.RunPython(mark_sources, unmark_sources)]
