"""On PostgreSQL, BM25's statistics kept beside the keyword index, so a search reads only what it needs.

``chunks_fts_terms``: one row per lexeme and chunk, with the lexeme's count in the chunk and the chunk's length,
all in the primary key's index (``INCLUDE``): a query's hits and each lexeme's document frequency are one
index range per lexeme, not the unnesting of every matching row's ``tsvector``. ``chunks_fts_stats``: the number
of rows and their total length, over 64 slots (a row counts in slot ``chunk_id % 64``), so concurrent ingests
rarely wait on one counter row; a search sums them instead of counting the whole index. Both are kept by
triggers on ``chunks_fts`` (insert, update of the document, delete, truncate) and filled here from the rows
there are. SQLite needs neither: FTS5 keeps its own.
"""

from __future__ import annotations

from django.db import migrations

from core.db_vendor import VendorRunSQL

SLOTS = 64

POSTGRESQL_FORWARD = [
    """CREATE TABLE chunks_fts_terms (
        lexeme text NOT NULL, chunk_id bigint NOT NULL, tf integer NOT NULL, length integer NOT NULL,
        PRIMARY KEY (lexeme, chunk_id) INCLUDE (tf, length))""",
    "CREATE TABLE chunks_fts_stats (slot integer PRIMARY KEY, n bigint NOT NULL, total bigint NOT NULL)",
    f"INSERT INTO chunks_fts_stats SELECT s, 0, 0 FROM generate_series(0, {SLOTS - 1}) AS s",
    # A row's terms are deleted by its own lexemes (the primary key), so no second index on chunk_id is needed.
    f"""CREATE FUNCTION chunks_fts_terms_sync() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP IN ('UPDATE', 'DELETE') THEN
            DELETE FROM chunks_fts_terms t
            WHERE t.lexeme = ANY (tsvector_to_array(OLD.document)) AND t.chunk_id = OLD.chunk_id;
            UPDATE chunks_fts_stats SET n = n - 1, total = total - OLD.length WHERE slot = OLD.chunk_id % {SLOTS};
        END IF;
        IF TG_OP IN ('INSERT', 'UPDATE') THEN
            INSERT INTO chunks_fts_terms (lexeme, chunk_id, tf, length)
            SELECT u.lexeme, NEW.chunk_id, coalesce(array_length(u.positions, 1), 1), NEW.length
            FROM unnest(NEW.document) AS u;
            UPDATE chunks_fts_stats SET n = n + 1, total = total + NEW.length WHERE slot = NEW.chunk_id % {SLOTS};
        END IF;
        RETURN NULL;
    END $$""",
    """CREATE TRIGGER chunks_fts_terms_sync AFTER INSERT OR DELETE OR UPDATE OF document, length ON chunks_fts
        FOR EACH ROW EXECUTE FUNCTION chunks_fts_terms_sync()""",
    """CREATE FUNCTION chunks_fts_terms_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        TRUNCATE chunks_fts_terms;
        UPDATE chunks_fts_stats SET n = 0, total = 0;
        RETURN NULL;
    END $$""",
    """CREATE TRIGGER chunks_fts_terms_truncate AFTER TRUNCATE ON chunks_fts
        FOR EACH STATEMENT EXECUTE FUNCTION chunks_fts_terms_truncate()""",
    """INSERT INTO chunks_fts_terms (lexeme, chunk_id, tf, length)
        SELECT u.lexeme, f.chunk_id, coalesce(array_length(u.positions, 1), 1), f.length
        FROM chunks_fts f, unnest(f.document) AS u""",
    f"""UPDATE chunks_fts_stats s SET n = c.n, total = c.total FROM (
        SELECT chunk_id % {SLOTS} AS slot, count(*) AS n, sum(length) AS total FROM chunks_fts GROUP BY 1) c
        WHERE s.slot = c.slot""",
]
POSTGRESQL_BACKWARD = [
    "DROP TRIGGER IF EXISTS chunks_fts_terms_truncate ON chunks_fts",
    "DROP TRIGGER IF EXISTS chunks_fts_terms_sync ON chunks_fts",
    "DROP FUNCTION IF EXISTS chunks_fts_terms_truncate()",
    "DROP FUNCTION IF EXISTS chunks_fts_terms_sync()",
    "DROP TABLE IF EXISTS chunks_fts_stats",
    "DROP TABLE IF EXISTS chunks_fts_terms",
]


class Migration(migrations.Migration):
    dependencies = [("retrieval", "0011_pgvector")]

    operations = [VendorRunSQL(postgresql=(POSTGRESQL_FORWARD, POSTGRESQL_BACKWARD))]
