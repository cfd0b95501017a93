"""The keyword index gains a ``stems`` column: a chunk's words stemmed in its own language (``Chunk.stems``).

FTS5 cannot add a column to a virtual table, so the table is made anew with the column and filled from the
chunks, and the triggers that keep it in sync copy ``stems`` too. English chunks keep an empty column (the
``porter`` tokenizer stems them), so an English knowledge base ranks exactly as before.

On PostgreSQL a chunk's ``tsvector`` is built with the text-search configuration of its own language instead
(``core.language.text_search_config``: dutch, german, english, simple for any other), so ``stems`` is not
indexed there; a change of ``language`` rewrites the row, and every row is written anew here.
"""

from __future__ import annotations

from django.db import migrations

from core import language
from core.db_vendor import VendorRunSQL

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


def _postgresql_refresh(config: str) -> str:
    """``chunks_fts_refresh`` (``0001_chunks_fts``) with the chunks' text-search configuration ``config`` (SQL);
    as there, only runs of letters and digits are words, as FTS5's unicode61 tokenizer reads them."""
    return f"""CREATE OR REPLACE FUNCTION chunks_fts_refresh(ids bigint[]) RETURNS void LANGUAGE sql AS $$
        INSERT INTO chunks_fts (chunk_id, document, length)
        SELECT d.id, d.document, chunks_fts_length(d.document) FROM (
            SELECT c.id, to_tsvector({config}, regexp_replace(c.text || ' ' || c.heading || ' ' || coalesce(s.title, ''),
                '[^[:alnum:]]+', ' ', 'g')) AS document
            FROM sources_chunk c JOIN sources_source s ON s.id = c.source_id WHERE c.id = ANY (ids)) d
        ON CONFLICT (chunk_id) DO UPDATE SET document = EXCLUDED.document, length = EXCLUDED.length
    $$"""


def _postgresql_chunk_trigger(columns: str) -> list[str]:
    return [
        "DROP TRIGGER IF EXISTS chunks_fts_chunk ON sources_chunk",
        f"""CREATE TRIGGER chunks_fts_chunk AFTER INSERT OR UPDATE OF {columns} ON sources_chunk
            FOR EACH ROW EXECUTE FUNCTION chunks_fts_chunk()""",
    ]


# The language codes and configuration names are the language layer's constants, never input.
_CASES = " ".join(f"WHEN '{code}' THEN '{language.text_search_config(code)}'" for code in language.SUPPORTED)
POSTGRESQL_REFILL = [
    "DELETE FROM chunks_fts",
    "SELECT chunks_fts_refresh(ARRAY(SELECT id FROM sources_chunk))",
]
POSTGRESQL_FORWARD = [
    f"""CREATE FUNCTION chunks_fts_config(code text) RETURNS regconfig LANGUAGE sql STABLE AS $$
        SELECT (CASE code {_CASES} ELSE '{language.TEXT_SEARCH_FALLBACK}' END)::regconfig
    $$""",
    _postgresql_refresh("chunks_fts_config(c.language)"),
    *_postgresql_chunk_trigger("text, heading, language"),
    *POSTGRESQL_REFILL,
]
POSTGRESQL_BACKWARD = [
    _postgresql_refresh("'english'"),
    *_postgresql_chunk_trigger("text, heading"),
    "DROP FUNCTION IF EXISTS chunks_fts_config(text)",
    *POSTGRESQL_REFILL,
]


class Migration(migrations.Migration):
    dependencies = [
        ("retrieval", "0009_query_log_to_generation"),
        ("sources", "0016_chunk_language"),
    ]

    operations = [
        VendorRunSQL(sqlite=(FORWARD, BACKWARD), postgresql=(POSTGRESQL_FORWARD, POSTGRESQL_BACKWARD)),
    ]
