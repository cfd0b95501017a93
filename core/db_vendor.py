"""The two stores, SQLite (FTS5, sqlite-vec) and PostgreSQL (tsvector, pgvector), behind one set of functions.

A module with raw SQL keeps its SQLite implementation and puts the PostgreSQL one in a sibling module
(``sources/vectorstore_postgres.py``, ``retrieval/search_postgres.py``); ``postgres_variant`` sends a call to
the sibling's function of the same name when the connection in use is PostgreSQL. The vendor is read on every
call, not at import, because ``foundry_site.db.switch.database_use`` rebinds the connection at run time.
``VendorRunSQL`` does the same for a migration's statements.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable, Sequence
from typing import Any, ParamSpec, TypeVar

from django.db import connection, migrations, router

P = ParamSpec("P")
R = TypeVar("R")

POSTGRESQL = "postgresql"
SQLITE = "sqlite"


def is_postgresql() -> bool:
    """Whether the default connection is PostgreSQL (``FOUNDRY_DATABASE_URL``)."""
    return connection.vendor == POSTGRESQL


def postgres_variant(module: str, *, method: bool = False) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """On PostgreSQL, run ``module``'s function of the same name instead (a method's ``self`` is not passed on)."""

    def decorate(function: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(function)
        def call(*args: P.args, **kwargs: P.kwargs) -> R:
            if connection.vendor != POSTGRESQL:
                return function(*args, **kwargs)
            variant = getattr(importlib.import_module(module), function.__name__)
            return variant(*(args[1:] if method else args), **kwargs)

        return call

    return decorate


class VendorRunSQL(migrations.RunSQL):
    """``RunSQL`` with statements per database vendor; a vendor left out runs nothing (its store needs none)."""

    def __init__(
        self,
        *,
        sqlite: tuple[Sequence[str], Sequence[str]] | None = None,
        postgresql: tuple[Sequence[str], Sequence[str]] | None = None,
        **kwargs: Any,
    ) -> None:
        self.by_vendor = {SQLITE: sqlite or ([], []), POSTGRESQL: postgresql or ([], [])}
        forward, backward = self.by_vendor[SQLITE]
        super().__init__(sql=list(forward) or migrations.RunSQL.noop, reverse_sql=list(backward), **kwargs)

    def deconstruct(self) -> tuple[str, list[Any], dict[str, Any]]:
        sqlite, postgresql = self.by_vendor[SQLITE], self.by_vendor[POSTGRESQL]
        return (self.__class__.__qualname__, [], {"sqlite": sqlite, "postgresql": postgresql})

    def _statements(self, schema_editor: Any, index: int) -> list[str]:
        vendor = schema_editor.connection.vendor
        if vendor not in self.by_vendor:
            raise NotImplementedError(f"this migration has statements for SQLite and PostgreSQL only, not {vendor}")
        return list(self.by_vendor[vendor][index])

    def database_forwards(self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any) -> None:
        self._run(app_label, schema_editor, self._statements(schema_editor, 0))

    def database_backwards(self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any) -> None:
        self._run(app_label, schema_editor, self._statements(schema_editor, 1))

    def _run(self, app_label: str, schema_editor: Any, statements: list[str]) -> None:
        """Each statement whole, as ``RunSQL`` runs a list (a function body's semicolons are not split)."""
        if router.allow_migrate(schema_editor.connection.alias, app_label, **self.hints):
            for statement in statements:
                schema_editor.execute(statement, params=None)
