"""Copy a SQLite knowledge base into the PostgreSQL database ``FOUNDRY_DATABASE_URL`` names (``foundry copy-sqlite``).

Every row of every Django table is copied with its primary key (so foreign keys, the audit chains' hashes and
API tokens stay valid), then every vector of every embedding model's two vec0 tables; the keyword index is
written by its triggers and then rebuilt from the chunks. All of it is one transaction on PostgreSQL, and
before it commits the row count of every table, vector table and the keyword index is compared with the
SQLite file's: a difference rolls everything back and names the table. The SQLite file is only read.

The target must be migrated (``foundry`` does that for a new database) and hold no data: its content types,
permissions and empty audit-chain heads, which ``migrate`` writes, are replaced by the file's, whose ids and
hashes the other rows use.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from django.apps import apps
from django.core.management.color import no_style
from django.db import connection, connections, models, transaction
from django.db.migrations.executor import MigrationExecutor

from sources import vectorstore, vectorstore_postgres

logger = logging.getLogger(__name__)

ALIAS = "copy_source"
BATCH = 2000
_DIMENSION = re.compile(r"float\[(\d+)\]")
# Written by migrate (the audit chains' empty heads too); replaced by the file's.
_SETUP_TABLES = {"django_content_type", "auth_permission", "generation_auditchainhead"}


class CopyError(Exception):
    """The copy cannot start, or its counts disagree (nothing was written)."""


@dataclass
class CopyReport:
    tables: dict[str, int] = field(default_factory=dict)  # table -> rows copied (equal in both databases)
    vectors: dict[str, int] = field(default_factory=dict)  # vector table -> rows copied
    keyword_rows: int = 0


def _models() -> list[type[models.Model]]:
    """Every table Django manages, parents before the tables that point to them (the keyword triggers read
    a chunk's source when the chunk is inserted)."""
    found = [m for m in apps.get_models(include_auto_created=True) if m._meta.managed and not m._meta.proxy]
    ordered: list[type[models.Model]] = []

    def visit(model: type[models.Model], path: tuple = ()) -> None:
        if model in ordered or model in path:
            return
        for f in model._meta.concrete_fields:
            target = f.related_model if f.is_relation and (f.many_to_one or f.one_to_one) else None
            if isinstance(target, type) and target is not model and target in found:
                visit(target, (*path, model))
        ordered.append(model)

    for model in found:
        visit(model)
    return ordered


def _open_source(path: Path) -> None:
    if not path.is_file():
        raise CopyError(f"{path}: no such SQLite file")
    with path.open("rb") as handle:
        if handle.read(16) != b"SQLite format 3\x00":
            raise CopyError(f"{path}: not an SQLite database")
    base = {"ENGINE": "foundry_site.db", "NAME": str(path), "OPTIONS": {"timeout": 30}}
    connections.settings[ALIAS] = connections.configure_settings({"default": base, ALIAS: base})[ALIAS]
    executor = MigrationExecutor(connections[ALIAS])
    pending = executor.migration_plan(executor.loader.graph.leaf_nodes())
    if pending:
        names = ", ".join(f"{m.app_label}.{m.name}" for m, _ in pending[:3])
        raise CopyError(
            f"{path} lacks {len(pending)} migration(s) of this version ({names}…): migrate it first "
            f"(FOUNDRY_DB={path} manage.py migrate, without FOUNDRY_DATABASE_URL), after a backup"
        )


def _target_empty(ordered: list[type[models.Model]]) -> None:
    held = [m._meta.db_table for m in ordered if m._meta.db_table not in _SETUP_TABLES and m._base_manager.exists()]
    if held:
        raise CopyError(
            f"the PostgreSQL database already holds data ({', '.join(held[:4])}); copy into an empty database"
        )


def _copy_rows(model: type[models.Model]) -> int:
    fields = [f.attname for f in model._meta.concrete_fields]
    rows = model._base_manager.using(ALIAS).order_by("pk").values_list(*fields)
    copied, batch = 0, []
    for values in rows.iterator(chunk_size=BATCH):
        batch.append(model(**dict(zip(fields, values))))
        if len(batch) == BATCH:
            model._base_manager.using("default").bulk_create(batch)
            copied, batch = copied + len(batch), []
    if batch:
        model._base_manager.using("default").bulk_create(batch)
        copied += len(batch)
    return copied


def _vector_tables() -> list[tuple[str, str, int]]:
    """(table, key column, dimension) of every vec0 table in the SQLite file."""
    with connections[ALIAS].cursor() as cur:
        cur.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL TABLE%%' "
            "AND (name LIKE 'vec\\_chunks\\_%%' ESCAPE '\\' OR name LIKE 'vec\\_windows\\_%%' ESCAPE '\\')"
        )
        found = cur.fetchall()
    tables = []
    for name, sql in found:
        match = _DIMENSION.search(sql)
        if not match or not re.fullmatch(r"[a-z0-9_]+", name):
            raise CopyError(f"vector table {name!r} of the SQLite file has no float[N] column")
        tables.append((name, "window_id" if name.startswith("vec_windows_") else "chunk_id", int(match.group(1))))
    return tables


def _copy_vectors(table: str, key: str, dimension: int) -> int:
    vectorstore_postgres._create(table, key, dimension)
    copied = 0
    with connections[ALIAS].cursor() as source, connection.cursor() as target:
        source.execute(f"SELECT {key}, collection_id, embedding FROM {table} ORDER BY {key}")
        while rows := source.fetchmany(BATCH):
            target.executemany(
                f"INSERT INTO {table} ({key}, collection_id, embedding) VALUES (%s, %s, %s::vector)",
                [
                    (unit, collection, vectorstore_postgres.literal(np.frombuffer(blob, dtype=np.float32)))
                    for unit, collection, blob in rows
                ],
            )
            copied += len(rows)
    return copied


def _count(alias: str, table: str) -> int:
    with connections[alias].cursor() as cur:
        cur.execute(f"SELECT count(*) FROM {table}")
        return int(cur.fetchone()[0])


def sqlite_copy(*, path: Path) -> CopyReport:
    """Copy the SQLite knowledge base at ``path`` into the (migrated, empty) PostgreSQL database, in one
    transaction, every count checked before it commits. CopyError (nothing written) when it cannot."""
    if connection.vendor != "postgresql":
        raise CopyError("set FOUNDRY_DATABASE_URL to the PostgreSQL database to copy into")
    _open_source(path)
    ordered = _models()
    report = CopyReport()
    try:
        _target_empty(ordered)
        with transaction.atomic():
            with connection.cursor() as cur:
                for statement in connection.ops.sql_flush(
                    no_style(), [m._meta.db_table for m in ordered], allow_cascade=True
                ):
                    cur.execute(statement)
            for model in ordered:
                report.tables[model._meta.db_table] = _copy_rows(model)
            for table, key, dimension in _vector_tables():
                report.vectors[table] = _copy_vectors(table, key, dimension)
            report.keyword_rows = vectorstore.fts_rebuild()
            with connection.cursor() as cur:
                for statement in connection.ops.sequence_reset_sql(no_style(), ordered):
                    cur.execute(statement)
            _counts_agree(report)
    finally:
        connections[ALIAS].close()
        del connections[ALIAS]
        connections.settings.pop(ALIAS, None)
    logger.info("copied %s tables and %s vector tables from %s", len(report.tables), len(report.vectors), path)
    return report


def _counts_agree(report: CopyReport) -> None:
    wrong = [
        f"{table}: {_count(ALIAS, table)} in the file, {_count('default', table)} copied"
        for table in [*report.tables, *report.vectors]
        if _count(ALIAS, table) != _count("default", table)
    ]
    chunks = _count("default", "sources_chunk")
    if report.keyword_rows != chunks:
        wrong.append(f"chunks_fts: {report.keyword_rows} rows for {chunks} chunks")
    if wrong:
        raise CopyError("the copy does not add up, so nothing was written: " + "; ".join(wrong))
