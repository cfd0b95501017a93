"""``FOUNDRY_DATABASE_URL``: a PostgreSQL URL becomes the database settings; anything else, and a server that
cannot be reached, fail with an error that names the variable."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import OperationalError

from core.db_vendor import VendorRunSQL
from foundry_site.db.url import database_from_url


def test_a_tcp_url_gives_host_port_credentials_and_driver_options() -> None:
    db = database_from_url("postgresql://fo%40undry:s3cr%2Ft@db.example:5433/kb?sslmode=require", conn_max_age=60)
    assert (db["ENGINE"], db["NAME"], db["USER"], db["PASSWORD"]) == (
        "foundry_site.db.postgresql",
        "kb",
        "fo@undry",
        "s3cr/t",
    )
    assert (db["HOST"], db["PORT"], db["OPTIONS"]) == ("db.example", "5433", {"sslmode": "require"})
    assert db["CONN_MAX_AGE"] == 60 and db["CONN_HEALTH_CHECKS"] is True


def test_a_socket_url_takes_the_folder_from_host() -> None:
    db = database_from_url("postgres://foundry@/foundry?host=/run/postgresql")
    assert (db["NAME"], db["USER"], db["HOST"], db["PORT"], db["OPTIONS"]) == (
        "foundry",
        "foundry",
        "/run/postgresql",
        "",
        {},
    )
    assert db["CONN_MAX_AGE"] == 0 and db["CONN_HEALTH_CHECKS"] is False


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("sqlite:///var/foundry.sqlite3", "its scheme is 'sqlite'"),
        ("mysql://root@db/foundry", "its scheme is 'mysql'"),
        ("db.example/foundry", "its scheme is 'missing'"),
        ("postgresql://foundry@db.example", "names no database"),
        ("postgresql://foundry@db.example/", "names no database"),
    ],
)
def test_anything_but_a_postgresql_url_with_a_database_is_refused(url: str, reason: str) -> None:
    with pytest.raises(ImproperlyConfigured, match="FOUNDRY_DATABASE_URL") as raised:
        database_from_url(url)
    assert reason in str(raised.value)


def test_a_server_that_cannot_be_reached_is_named_with_the_variable(tmp_path: Path, django_db_blocker: Any) -> None:
    from foundry_site.db.postgresql.base import DatabaseWrapper

    settings = database_from_url(f"postgresql://foundry@/kb?host={tmp_path}")
    settings.update({"TIME_ZONE": None, "AUTOCOMMIT": True, "ATOMIC_REQUESTS": False, "TEST": {}})
    wrapper = DatabaseWrapper(settings, "unreachable")
    expected = "FOUNDRY_DATABASE_URL: cannot connect to PostgreSQL database 'kb'"
    with django_db_blocker.unblock(), pytest.raises(OperationalError, match=expected) as raised:
        wrapper.ensure_connection()
    assert str(tmp_path) in str(raised.value)


class _Editor:
    def __init__(self, vendor: str) -> None:
        self.connection = type("Connection", (), {"vendor": vendor, "alias": "default"})()
        self.ran: list[str] = []

    def execute(self, sql: str, params: object = None) -> None:
        self.ran.append(sql)


@pytest.mark.parametrize("vendor", ["sqlite", "postgresql"])
def test_a_vendor_migration_runs_that_vendors_statements_each_whole(vendor: str) -> None:
    operation = VendorRunSQL(
        sqlite=(["CREATE s1", "CREATE s2; still s2"], ["DROP s"]), postgresql=(["CREATE p; $$ body; $$"], ["DROP p"])
    )
    forward, backward = _Editor(vendor), _Editor(vendor)
    operation.database_forwards("retrieval", forward, None, None)
    operation.database_backwards("retrieval", backward, None, None)
    expected = {
        "sqlite": (["CREATE s1", "CREATE s2; still s2"], ["DROP s"]),
        "postgresql": (["CREATE p; $$ body; $$"], ["DROP p"]),
    }
    assert (forward.ran, backward.ran) == expected[vendor]
    assert operation.reversible


def test_a_vendor_migration_refuses_a_vendor_it_has_no_statements_for() -> None:
    with pytest.raises(NotImplementedError, match="not mysql"):
        VendorRunSQL(sqlite=(["CREATE s"], [])).database_forwards("retrieval", _Editor("mysql"), None, None)


@pytest.mark.postgres_only
@pytest.mark.django_db
def test_a_database_without_pgvector_fails_the_startup_check() -> None:
    from django.db import connection

    from foundry_site.db.checks import check_sqlite_extensions

    assert check_sqlite_extensions() == []
    with connection.cursor() as cur:
        cur.execute("DROP EXTENSION vector")  # inside the test's transaction: rolled back after it
    (error,) = check_sqlite_extensions()
    assert error.id == "foundry.E001" and "lacks pgvector's extension 'vector'" in error.msg
    assert "CREATE EXTENSION vector" in error.hint
    with connection.cursor() as cur:  # a database the migration has not reached: `migrate` creates the extension
        cur.execute("DELETE FROM django_migrations WHERE app = 'retrieval' AND name = '0011_pgvector'")
    assert check_sqlite_extensions() == []
