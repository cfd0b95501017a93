"""``foundry copy-sqlite`` in real processes: a SQLite knowledge base ingested and asked is copied into a new
PostgreSQL database, which then answers the same question with the same citations, and whose audit chain and
index check pass; a second copy into it, and a file that is no SQLite database, are refused."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import psycopg
import pytest

from tests.foundry_site.test_cli_backup import answer, foundry, foundry_env, ok

pytestmark = pytest.mark.postgres_only


@pytest.fixture
def target_url() -> str:
    """A new, empty database on the test run's PostgreSQL server (``tests/settings.py``)."""
    server = os.environ["FOUNDRY_DATABASE_URL"]
    name = f"copy_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return server.replace("/postgres?", f"/{name}?", 1)


def test_a_copied_knowledge_base_answers_the_same(tmp_path: Path, target_url: str) -> None:
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "bus.md").write_text("# Bus\n\nUp to 8 sensors can be connected to the field bus.\n", encoding="utf-8")
    (kb / "power.md").write_text("# Power\n\nThe controller runs on 24 V DC.\n", encoding="utf-8")
    sqlite_env = foundry_env(tmp_path / "sqlite-home")
    sqlite_env.pop("FOUNDRY_DATABASE_URL")
    ok(foundry(sqlite_env, "ingest", str(kb)))
    before = answer(sqlite_env)

    env = {**foundry_env(tmp_path / "pg-home"), "FOUNDRY_DATABASE_URL": target_url}
    copied = ok(foundry(env, "copy-sqlite", str(tmp_path / "sqlite-home" / "foundry.sqlite3")))
    assert "every count matches the file" in copied and "2 vector tables" in copied, copied
    after = answer(env)
    assert (after["answer"], after["answer_class"], after["citations"]) == (
        before["answer"],
        before["answer_class"],
        before["citations"],
    )
    assert "the chain verifies" in ok(foundry(env, "audit", "verify"))
    assert ok(foundry(env, "check")).rstrip().endswith("OK")

    again = foundry(env, "copy-sqlite", str(tmp_path / "sqlite-home" / "foundry.sqlite3"))
    assert again.returncode != 0 and "already holds data" in again.stderr, again.stderr


def test_a_file_that_is_no_sqlite_database_is_refused(tmp_path: Path, target_url: str) -> None:
    (tmp_path / "notes.txt").write_text("not a database\n", encoding="utf-8")
    env = {**foundry_env(tmp_path / "pg-home"), "FOUNDRY_DATABASE_URL": target_url}
    done = foundry(env, "copy-sqlite", str(tmp_path / "notes.txt"))
    assert done.returncode != 0 and "not an SQLite database" in done.stderr, done.stderr
