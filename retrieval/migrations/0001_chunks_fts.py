"""FTS5 index over chunk text, heading and source title, kept in sync by triggers.

The triggers fire inside whatever transaction writes the chunk rows, so the
FTS rows can never disagree with the chunks.
"""

from __future__ import annotations

from django.db import migrations

CREATE = [
    """CREATE VIRTUAL TABLE chunks_fts USING fts5(
        text, heading, title, tokenize = 'porter unicode61 remove_diacritics 2')""",
    """CREATE TRIGGER chunks_fts_insert AFTER INSERT ON sources_chunk BEGIN
        INSERT INTO chunks_fts(rowid, text, heading, title)
        VALUES (new.id, new.text, new.heading,
                coalesce((SELECT title FROM sources_source WHERE id = new.source_id), ''));
    END""",
    """CREATE TRIGGER chunks_fts_delete AFTER DELETE ON sources_chunk BEGIN
        DELETE FROM chunks_fts WHERE rowid = old.id;
    END""",
    """CREATE TRIGGER chunks_fts_update AFTER UPDATE OF text, heading ON sources_chunk BEGIN
        UPDATE chunks_fts SET text = new.text, heading = new.heading WHERE rowid = old.id;
    END""",
    """CREATE TRIGGER chunks_fts_title AFTER UPDATE OF title ON sources_source BEGIN
        UPDATE chunks_fts SET title = new.title
        WHERE rowid IN (SELECT id FROM sources_chunk WHERE source_id = new.id);
    END""",
]
DROP = [
    "DROP TRIGGER IF EXISTS chunks_fts_title",
    "DROP TRIGGER IF EXISTS chunks_fts_update",
    "DROP TRIGGER IF EXISTS chunks_fts_delete",
    "DROP TRIGGER IF EXISTS chunks_fts_insert",
    "DROP TABLE IF EXISTS chunks_fts",
]


class Migration(migrations.Migration):
    dependencies = [("sources", "0001_initial")]
    operations = [migrations.RunSQL(sql=CREATE, reverse_sql=DROP)]
