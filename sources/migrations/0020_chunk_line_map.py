"""Each chunk whose text does not map line by line keeps the source lines of each of its lines (``Chunk.line_map``).

A sheet's or a Word table's rows are chunked under their header row, and a Word file's paragraphs or a slide's
shapes a blank line apart, so a chunk's n-th line is not source line ``line_start + n``: a quote of one row was
cited as the chunk's whole span ("rows 20-45") and the viewer marked the whole table. Now the chunker records each
line's rows (paragraphs, lines) and the quote cites, and the viewer marks, its own row. The column is added in
place (Django's table rebuild breaks the FTS triggers on sources_chunk, see 0003). Sources that have a chunk
without the map it needs get ``line_map=none`` in their recorded chunking settings, a key the configured settings
do not have, so the next ingest re-chunks them (as 0015 and 0017 did). Nothing is deleted: until then their
chunks are cited whole, as before.
"""

from __future__ import annotations

from typing import Any

from django.db import migrations, models
from django.db.models import Value
from django.db.models.functions import Concat

from core.units import maps_line_by_line

MAP_MARK = " line_map=none"
# JSON is text to SQLite; PostgreSQL has its own type, which Django's JSONField reads and writes there.
COLUMN_SQL = {
    "postgresql": "ALTER TABLE sources_chunk ADD COLUMN line_map jsonb NULL",
    "sqlite": "ALTER TABLE sources_chunk ADD COLUMN line_map text NULL CHECK (JSON_VALID(line_map) OR line_map IS NULL)",
}
DROP_SQL = "ALTER TABLE sources_chunk DROP COLUMN line_map"

LINE_MAP_FIELD = models.JSONField(
    null=True,
    blank=True,
    editable=False,
    help_text="The source lines [first, last] (rows, paragraphs) of each line of the text, null for a line that "
    "stands for none (a table's header row over its rows); empty when the text maps line by line.",
)


def add_column(apps: Any, schema_editor: Any) -> None:
    schema_editor.execute(COLUMN_SQL[schema_editor.connection.vendor])


def drop_column(apps: Any, schema_editor: Any) -> None:
    schema_editor.execute(DROP_SQL)


def mark_sources(apps: Any, schema_editor: Any) -> None:
    Source = apps.get_model("sources", "Source")
    Chunk = apps.get_model("sources", "Chunk")
    unmapped = set()
    rows = Chunk.objects.values_list("source_id", "text", "line_start", "line_end", "page_start", "page_end")
    for source_id, text, line_start, line_end, page_start, page_end in rows.iterator(chunk_size=2000):
        if page_start == page_end and not maps_line_by_line(text, line_start, line_end, page_start, page_end):
            unmapped.add(source_id)
    (
        Source.objects.filter(pk__in=unmapped)
        .exclude(chunking="")
        .exclude(chunking__contains=MAP_MARK)
        .update(chunking=Concat("chunking", Value(MAP_MARK)))
    )


def unmark_sources(apps: Any, schema_editor: Any) -> None:
    Source = apps.get_model("sources", "Source")
    for pk, chunking in Source.objects.filter(chunking__contains=MAP_MARK).values_list("pk", "chunking"):
        Source.objects.filter(pk=pk).update(chunking=chunking.replace(MAP_MARK, ""))


class Migration(migrations.Migration):
    dependencies = [
        ("sources", "0019_extract_structure"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunPython(add_column, drop_column)],
            state_operations=[migrations.AddField(model_name="chunk", name="line_map", field=LINE_MAP_FIELD)],
        ),
        migrations.RunPython(mark_sources, unmark_sources),
    ]
