"""The keyword index gains a ``stems`` column: a chunk's words stemmed in its own language (``Chunk.stems``).

FTS5 cannot add a column to a virtual table, so the table is made anew with the column and filled from the
chunks, and the triggers that keep it in sync copy ``stems`` too. English chunks keep an empty column (the
``porter`` tokenizer stems them), so an English knowledge base ranks exactly as before.
"""

from __future__ import annotations

from django.db import migrations

TRIGGERS_DROP = [
    "DROP TRIGGER IF EXISTS chunks_fts_title",
    "DROP TRIGGER IF EXISTS chunks_fts_update",
    "DROP TRIGGER IF EXISTS chunks_fts_delete",
    "DROP TRIGGER IF EXISTS chunks_fts_insert",
    "DROP TABLE IF EXISTS chunks_fts",
]
TITLE_TRIGGER = """CREATE TRIGGER chunks_fts_title AFTER UPDATE OF title ON sources_source BEGIN
        UPDATE chunks_fts SET title = new.title
        WHERE rowid IN (SELECT id FROM sources_chunk WHERE source_id = new.id);
    END"""
DELETE_TRIGGER = """CREATE TRIGGER chunks_fts_delete AFTER DELETE ON sources_chunk BEGIN
        DELETE FROM chunks_fts WHERE rowid = old.id;
    END"""

FORWARD = [
    *TRIGGERS_DROP,
    """CREATE VIRTUAL TABLE chunks_fts USING fts5(
        text, heading, title, stems, tokenize = 'porter unicode61 remove_diacritics 2')""",
    """INSERT INTO chunks_fts(rowid, text, heading, title, stems)
        SELECT c.id, c.text, c.heading, coalesce(s.title, ''), c.stems
        FROM sources_chunk c JOIN sources_source s ON s.id = c.source_id""",
    """CREATE TRIGGER chunks_fts_insert AFTER INSERT ON sources_chunk BEGIN
        INSERT INTO chunks_fts(rowid, text, heading, title, stems)
        VALUES (new.id, new.text, new.heading,
                coalesce((SELECT title FROM sources_source WHERE id = new.source_id), ''), new.stems);
    END""",
    DELETE_TRIGGER,
    """CREATE TRIGGER chunks_fts_update AFTER UPDATE OF text, heading, stems ON sources_chunk BEGIN
        UPDATE chunks_fts SET text = new.text, heading = new.heading, stems = new.stems WHERE rowid = old.id;
    END""",
    TITLE_TRIGGER,
]
BACKWARD = [
    *TRIGGERS_DROP,
    """CREATE VIRTUAL TABLE chunks_fts USING fts5(
        text, heading, title, tokenize = 'porter unicode61 remove_diacritics 2')""",
    """INSERT INTO chunks_fts(rowid, text, heading, title)
        SELECT c.id, c.text, c.heading, coalesce(s.title, '')
        FROM sources_chunk c JOIN sources_source s ON s.id = c.source_id""",
    """CREATE TRIGGER chunks_fts_insert AFTER INSERT ON sources_chunk BEGIN
        INSERT INTO chunks_fts(rowid, text, heading, title)
        VALUES (new.id, new.text, new.heading,
                coalesce((SELECT title FROM sources_source WHERE id = new.source_id), ''));
    END""",
    DELETE_TRIGGER,
    """CREATE TRIGGER chunks_fts_update AFTER UPDATE OF text, heading ON sources_chunk BEGIN
        UPDATE chunks_fts SET text = new.text, heading = new.heading WHERE rowid = old.id;
    END""",
    TITLE_TRIGGER,
]


class Migration(migrations.Migration):
    dependencies = [
        ("retrieval", "0009_query_log_to_generation"),
        ("sources", "0016_chunk_language"),
    ]

    operations = [migrations.RunSQL(sql=FORWARD, reverse_sql=BACKWARD)]
