"""PostgreSQL: the pgvector extension, whose ``vector`` type holds the chunk embeddings (``sources.vectorstore``).

Creating an extension needs the right to (a superuser, or the database owner where pgvector is trusted);
where it is missing and cannot be created the migration stops with the statement an administrator runs.
SQLite needs nothing here: sqlite-vec is loaded into every connection (``foundry_site.db``). Going back
keeps the extension, which other tables of the database may use.
"""

from __future__ import annotations

from typing import Any

from django.db import DatabaseError, migrations

from core.db_vendor import POSTGRESQL

SQL = "CREATE EXTENSION IF NOT EXISTS vector"


def vector_extension(apps: Any, schema_editor: Any) -> None:
    connection = schema_editor.connection
    if connection.vendor != POSTGRESQL:
        return
    with connection.cursor() as cur:
        cur.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'")
        if cur.fetchone():
            return
        try:
            cur.execute(SQL)
        except DatabaseError as exc:
            raise RuntimeError(
                f"PostgreSQL database {connection.settings_dict['NAME']!r} lacks pgvector's extension 'vector' "
                f"and this user cannot create it ({str(exc).strip()}). Install pgvector on the server and run, "
                f"as a superuser in that database: {SQL};"
            ) from exc


class Migration(migrations.Migration):
    dependencies = [("retrieval", "0010_chunks_fts_stems")]
    operations = [migrations.RunPython(vector_extension, migrations.RunPython.noop)]
