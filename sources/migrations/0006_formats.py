"""New document formats: Word, HTML, PowerPoint, Excel, CSV and images (OCR).

- ``Source.kind`` gains their choices (state only: a choice list is not in the database).
- ``Chunk.ocr_confidence``: set on chunks read by OCR, shown in citations. Added in place,
  not by Django's SQLite table rebuild, which the FTS triggers on sources_chunk break (see 0003).
- JSON sources are re-chunked by the next ingest: their values are now labelled with their
  key paths (``network.ip_address: 192.168.10.50``). Their recorded chunking settings get
  ``json_values=unlabelled``, a key the configured settings do not have, so ingest sees
  settings that differ and re-chunks them (``sources.services.chunking_settings``), and
  ``foundry check`` lists them until then. Nothing is deleted: the old chunks stay searchable
  until that ingest.
"""

from __future__ import annotations

from typing import Any

from django.db import migrations, models
from django.db.models import Value
from django.db.models.functions import Concat

KINDS = [
    ("txt", "Text"),
    ("md", "Markdown"),
    ("pdf", "PDF"),
    ("json", "JSON"),
    ("docx", "Word"),
    ("html", "HTML"),
    ("pptx", "PowerPoint"),
    ("xlsx", "Excel"),
    ("csv", "CSV"),
    ("image", "Image"),
]
OCR_FIELD = models.FloatField(
    null=True,
    blank=True,
    editable=False,
    help_text="Read by OCR from an image: the lowest mean word confidence (0-100) of its pages. Empty for text "
    "the file holds as text.",
)
JSON_MARK = " json_values=unlabelled"


def mark_json(apps: Any, schema_editor: Any) -> None:
    Source = apps.get_model("sources", "Source")
    (
        Source.objects.filter(kind="json")
        .exclude(chunking="")
        .exclude(chunking__contains=JSON_MARK)
        .update(chunking=Concat("chunking", Value(JSON_MARK)))
    )


def unmark_json(apps: Any, schema_editor: Any) -> None:
    Source = apps.get_model("sources", "Source")
    for pk, chunking in Source.objects.filter(chunking__contains=JSON_MARK).values_list("pk", "chunking"):
        Source.objects.filter(pk=pk).update(chunking=chunking.replace(JSON_MARK, ""))


class Migration(migrations.Migration):
    dependencies = [
        ("sources", "0005_source_cited_name"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="source", name="kind", field=models.CharField(blank=True, choices=KINDS, max_length=8)
                )
            ],
        ),
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(
                    sql="ALTER TABLE sources_chunk ADD COLUMN ocr_confidence real NULL",
                    reverse_sql="ALTER TABLE sources_chunk DROP COLUMN ocr_confidence",
                )
            ],
            state_operations=[migrations.AddField(model_name="chunk", name="ocr_confidence", field=OCR_FIELD)],
        ),
        migrations.RunPython(mark_json, unmark_json),
    ]
