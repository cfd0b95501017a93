"""Run a block of code against another database: the eval commands' own indexes, a backup's copy.

Every query in the project goes through the ``default`` connection, so for the
duration of the block that alias is bound to a fresh connection to it
(migrated first); the previous connection is put back untouched afterwards,
even if it was inside a transaction. Thread-local, like Django's connections. ``database_use`` binds a SQLite
file on either store (with ``FOUNDRY_DATABASE_URL`` set it takes the SQLite settings, ``FOUNDRY_SQLITE_DATABASE``);
``postgresql_database_use`` another database on the configured PostgreSQL server, created when missing.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator
from pathlib import Path

from django.conf import settings
from django.contrib.contenttypes.models import ContentType
from django.core.management import call_command
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections
from django.db.utils import load_backend


@contextlib.contextmanager
def database_use(path: Path) -> Iterator[None]:
    """Bind the default connection to ``path`` (created and migrated if needed) inside the block."""
    previous = connections[DEFAULT_DB_ALIAS]
    if previous.vendor == "sqlite":
        settings_dict = copy.deepcopy(previous.settings_dict)
    else:
        settings_dict = connections.configure_settings(
            {DEFAULT_DB_ALIAS: copy.deepcopy(settings.FOUNDRY_SQLITE_DATABASE)}
        )[DEFAULT_DB_ALIAS]
    settings_dict["NAME"] = str(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with _bound(settings_dict):
        yield


@contextlib.contextmanager
def postgresql_database_use(name: str) -> Iterator[None]:
    """Bind the default connection to database ``name`` on the configured PostgreSQL server (created, with the
    configured user as its owner, and migrated if needed) inside the block."""
    from psycopg import errors, sql

    previous = connections[DEFAULT_DB_ALIAS]
    with previous.cursor() as cur:
        cur.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name])
        if cur.fetchone() is None:
            try:
                cur.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)).as_string(cur.connection))
            except DatabaseError as exc:
                if not isinstance(exc.__cause__, errors.InsufficientPrivilege):
                    raise
                raise PermissionError(
                    f"PostgreSQL user {previous.settings_dict['USER']!r} may not create database {name!r} "
                    f'(FOUNDRY_DATABASE_URL): create it once as a superuser (CREATE DATABASE "{name}" OWNER '
                    f'"{previous.settings_dict["USER"]}";), or grant CREATEDB'
                ) from exc
    settings_dict = copy.deepcopy(previous.settings_dict)
    settings_dict["NAME"] = name
    with _bound(settings_dict):
        yield


@contextlib.contextmanager
def _bound(settings_dict: dict) -> Iterator[None]:
    previous = connections[DEFAULT_DB_ALIAS]
    replacement = load_backend(settings_dict["ENGINE"]).DatabaseWrapper(settings_dict, DEFAULT_DB_ALIAS)
    connections[DEFAULT_DB_ALIAS] = replacement
    # Cached content types carry the other database's primary keys.
    ContentType.objects.clear_cache()
    try:
        call_command("migrate", verbosity=0, interactive=False)
        yield
    finally:
        replacement.close()
        connections[DEFAULT_DB_ALIAS] = previous
        ContentType.objects.clear_cache()
