"""FTS5 index over chunk text, heading and source title, kept in sync by triggers.

The triggers fire inside whatever transaction writes the chunk rows, so the
FTS rows can never disagree with the chunks.

On PostgreSQL the same index is a table of one ``tsvector`` per chunk (text, heading and title, equally
weighted as FTS5's ``bm25()`` weighs its columns) with a GIN index, and ``length``, the chunk's word count
that BM25 needs. ``chunks_fts_refresh`` writes a chunk's row; triggers call it, and clear the table when
the chunks are truncated. Until ``0010_chunks_fts_stems`` every chunk is read as English, as FTS5's
``porter`` tokenizer reads it here.
"""

from __future__ import annotations

from django.db import migrations

from core.db_vendor import VendorRunSQL

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


def postgresql_refresh(document: str) -> str:
    """The function that (re)writes the keyword rows of chunks ``ids``; ``document`` is their tsvector in SQL
    over ``c`` (the chunk) and ``s`` (its source)."""
    return f"""CREATE OR REPLACE FUNCTION chunks_fts_refresh(ids bigint[]) RETURNS void LANGUAGE sql AS $$
        INSERT INTO chunks_fts (chunk_id, document, length)
        SELECT d.id, d.document, chunks_fts_length(d.document) FROM (
            SELECT c.id, {document} AS document
            FROM sources_chunk c JOIN sources_source s ON s.id = c.source_id WHERE c.id = ANY (ids)) d
        ON CONFLICT (chunk_id) DO UPDATE SET document = EXCLUDED.document, length = EXCLUDED.length
    $$"""


# FTS5's unicode61 tokenizer reads runs of letters and digits; PostgreSQL's parser would keep "specs.json",
# "192.168.10.50" or "a_b" whole (as a host, a number, a word), so every other character becomes a space first.
ENGLISH_DOCUMENT = (
    "to_tsvector('english', regexp_replace(c.text || ' ' || c.heading || ' ' || coalesce(s.title, ''), "
    "'[^[:alnum:]]+', ' ', 'g'))"
)
POSTGRESQL_CREATE = [
    """CREATE TABLE chunks_fts (chunk_id bigint PRIMARY KEY, document tsvector NOT NULL, length integer NOT NULL)""",
    "CREATE INDEX chunks_fts_document ON chunks_fts USING gin (document)",
    # Positions count every word, stop words included, as FTS5 counts a row's tokens for BM25.
    """CREATE FUNCTION chunks_fts_length(document tsvector) RETURNS integer LANGUAGE sql IMMUTABLE AS $$
        SELECT coalesce(max(p), 0)::integer FROM unnest(document) AS u, unnest(u.positions) AS p
    $$""",
    postgresql_refresh(ENGLISH_DOCUMENT),
    """CREATE FUNCTION chunks_fts_chunk() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM chunks_fts_refresh(ARRAY[NEW.id]);
        RETURN NULL;
    END $$""",
    """CREATE TRIGGER chunks_fts_chunk AFTER INSERT OR UPDATE OF text, heading ON sources_chunk
        FOR EACH ROW EXECUTE FUNCTION chunks_fts_chunk()""",
    """CREATE FUNCTION chunks_fts_delete() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        DELETE FROM chunks_fts WHERE chunk_id = OLD.id;
        RETURN NULL;
    END $$""",
    """CREATE TRIGGER chunks_fts_delete AFTER DELETE ON sources_chunk
        FOR EACH ROW EXECUTE FUNCTION chunks_fts_delete()""",
    # Django's flush (tests, `foundry` resets) truncates the chunk table, which fires no row trigger.
    """CREATE FUNCTION chunks_fts_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        TRUNCATE chunks_fts;
        RETURN NULL;
    END $$""",
    """CREATE TRIGGER chunks_fts_truncate AFTER TRUNCATE ON sources_chunk
        FOR EACH STATEMENT EXECUTE FUNCTION chunks_fts_truncate()""",
    """CREATE FUNCTION chunks_fts_title() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM chunks_fts_refresh(ARRAY(SELECT id FROM sources_chunk WHERE source_id = NEW.id));
        RETURN NULL;
    END $$""",
    """CREATE TRIGGER chunks_fts_title AFTER UPDATE OF title ON sources_source
        FOR EACH ROW WHEN (OLD.title IS DISTINCT FROM NEW.title) EXECUTE FUNCTION chunks_fts_title()""",
]
POSTGRESQL_DROP = [
    "DROP TRIGGER IF EXISTS chunks_fts_title ON sources_source",
    "DROP TRIGGER IF EXISTS chunks_fts_truncate ON sources_chunk",
    "DROP TRIGGER IF EXISTS chunks_fts_delete ON sources_chunk",
    "DROP TRIGGER IF EXISTS chunks_fts_chunk ON sources_chunk",
    "DROP FUNCTION IF EXISTS chunks_fts_title()",
    "DROP FUNCTION IF EXISTS chunks_fts_truncate()",
    "DROP FUNCTION IF EXISTS chunks_fts_delete()",
    "DROP FUNCTION IF EXISTS chunks_fts_chunk()",
    "DROP FUNCTION IF EXISTS chunks_fts_refresh(bigint[])",
    "DROP FUNCTION IF EXISTS chunks_fts_length(tsvector)",
    "DROP TABLE IF EXISTS chunks_fts",
]


class Migration(migrations.Migration):
    dependencies = [("sources", "0001_initial")]
    operations = [VendorRunSQL(sqlite=(CREATE, DROP), postgresql=(POSTGRESQL_CREATE, POSTGRESQL_DROP))]
