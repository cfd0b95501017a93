"""SQLite backend on pysqlite3 that loads sqlite-vec into every connection.

This Python's stdlib ``sqlite3`` cannot load extensions. Django's sqlite3
backend subclasses ``sqlite3.Cursor`` at import time, so pysqlite3 has to stand
in for ``sqlite3`` *before* that backend is imported; the swap below does that
and refuses to run if the stdlib backend was already loaded.
"""

from __future__ import annotations

import sys

import pysqlite3
import pysqlite3.dbapi2

if "django.db.backends.sqlite3.base" in sys.modules and sys.modules["sqlite3"] is not pysqlite3:
    raise RuntimeError(
        "django.db.backends.sqlite3 was imported before foundry_site.db; "
        "set ENGINE to 'foundry_site.db' and import nothing that opens SQLite earlier."
    )
sys.modules["sqlite3"] = pysqlite3
sys.modules["sqlite3.dbapi2"] = pysqlite3.dbapi2

import sqlite_vec  # noqa: E402
from django.db.backends.sqlite3 import base as sqlite_base  # noqa: E402


def load_extensions(conn: pysqlite3.dbapi2.Connection) -> None:
    """Load sqlite-vec into ``conn`` and close the extension-loading door again."""
    conn.enable_load_extension(True)
    try:
        sqlite_vec.load(conn)
    finally:
        conn.enable_load_extension(False)


class DatabaseWrapper(sqlite_base.DatabaseWrapper):
    def get_new_connection(self, conn_params: dict) -> pysqlite3.dbapi2.Connection:
        conn = super().get_new_connection(conn_params)
        load_extensions(conn)
        return conn
