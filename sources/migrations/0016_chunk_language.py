"""Each chunk records its language, and the stems of its words in that language for keyword search.

The keyword index stemmed every text as English (FTS5 ``porter``), so a Dutch or German question matched a
passage only where it used the very same word form. ``language`` is detected per chunk (the source's language as
the prior of a chunk too short to tell) and ``stems`` holds its content words' Snowball stems in that language;
``retrieval.0010_chunks_fts_stems`` indexes them. Existing chunks are read here, source by source; nothing is
re-embedded.
"""

from __future__ import annotations

from typing import Any

from django.db import migrations, models

from core import language


def detect_chunks(apps: Any, schema_editor: Any) -> None:
    Chunk = apps.get_model("sources", "Chunk")
    source_ids = Chunk.objects.values_list("source_id", flat=True).distinct()
    for source_id in list(source_ids):
        chunks = list(Chunk.objects.filter(source_id=source_id).order_by("ordinal").only("id", "text"))
        for chunk, code in zip(chunks, language.texts_languages([c.text for c in chunks])):
            chunk.language = code
            chunk.stems = language.keyword_stems(chunk.text, code)
        Chunk.objects.bulk_update(chunks, ["language", "stems"], batch_size=500)


LANGUAGE_FIELD = models.CharField(
    default="en", editable=False, help_text="The language the text is written in (en, nl, de).", max_length=8
)
STEMS_FIELD = models.TextField(
    blank=True,
    editable=False,
    help_text="The text's content words stemmed in its language, for keyword search; empty for English, "
    "which the keyword index stems itself.",
)


class Migration(migrations.Migration):
    dependencies = [
        ("sources", "0015_table_windows"),
    ]

    operations = [
        # In place, not Django's table rebuild, which the FTS triggers on sources_chunk break (see 0003).
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(
                    sql="ALTER TABLE sources_chunk ADD COLUMN language varchar(8) NOT NULL DEFAULT 'en'",
                    reverse_sql="ALTER TABLE sources_chunk DROP COLUMN language",
                ),
                migrations.RunSQL(
                    sql="ALTER TABLE sources_chunk ADD COLUMN stems text NOT NULL DEFAULT ''",
                    reverse_sql="ALTER TABLE sources_chunk DROP COLUMN stems",
                ),
            ],
            state_operations=[
                migrations.AddField(model_name="chunk", name="language", field=LANGUAGE_FIELD),
                migrations.AddField(model_name="chunk", name="stems", field=STEMS_FIELD),
            ],
        ),
        migrations.RunPython(detect_chunks, migrations.RunPython.noop),
    ]
