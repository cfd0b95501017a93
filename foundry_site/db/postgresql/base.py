"""PostgreSQL backend (``FOUNDRY_DATABASE_URL``): Django's own, with a connection error that names the variable.

A refused connection stays an ``OperationalError`` (``core.jobs`` retries a task on it: a server that is
restarting comes back), but its message says which setting pointed there, so the first ``foundry``
command on a wrong URL tells the operator what to fix.
"""

from __future__ import annotations

from typing import Any

import psycopg
from django.db import OperationalError
from django.db.backends.postgresql import base as postgresql_base

from foundry_site.db.url import VARIABLE


class DatabaseWrapper(postgresql_base.DatabaseWrapper):
    def get_new_connection(self, conn_params: dict[str, Any]) -> Any:
        try:
            return super().get_new_connection(conn_params)
        except psycopg.OperationalError as exc:
            where = self.settings_dict.get("HOST") or "the default socket"
            raise OperationalError(
                f"{VARIABLE}: cannot connect to PostgreSQL database {self.settings_dict.get('NAME')!r} at {where}: "
                f"{str(exc).strip()}"
            ) from exc
