"""A new home just works: every command creates its database, `foundry init` the first admin."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.reliability.test_db_faults import CLI, REPO, foundry, foundry_env, migrate


def created(done: subprocess.CompletedProcess[str]) -> bool:
    return "Created a new knowledge base at" in done.stderr


def test_the_first_command_on_a_new_home_creates_its_database(tmp_path: Path) -> None:
    env = foundry_env(tmp_path / "home", tmp_path / "home" / "foundry.sqlite3")
    first = foundry(env, "status")
    assert first.returncode == 0 and created(first) and "Traceback" not in first.stderr, first.stderr
    again = foundry(env, "collections", "list")
    assert again.returncode == 0 and not created(again), again.stderr


def test_the_empty_file_an_older_version_left_behind_is_set_up(tmp_path: Path) -> None:
    db = tmp_path / "home" / "foundry.sqlite3"
    env = foundry_env(tmp_path / "home", db)
    sqlite3.connect(db).execute("PRAGMA user_version = 0").connection.close()  # a file with no tables
    done = foundry(env, "status")
    assert done.returncode == 0 and created(done), done.stderr


def test_two_commands_started_together_on_a_new_home_both_work(tmp_path: Path) -> None:
    env = foundry_env(tmp_path / "home", tmp_path / "home" / "foundry.sqlite3")
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CLI, "collections", "list"],
            env=env,
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    results = [p.communicate(timeout=600) + (p.returncode,) for p in procs]
    assert all(code == 0 for _, _, code in results), results
    assert sum("Created a new knowledge base" in err for _, err, _ in results) == 1, results


def test_a_database_with_data_and_pending_migrations_is_refused_not_changed(tmp_path: Path) -> None:
    env = foundry_env(tmp_path / "home", tmp_path / "home" / "foundry.sqlite3")
    migrate(env)
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "sources", "0004"], env=env, cwd=REPO, check=True, capture_output=True
    )
    done = foundry(env, "init")
    assert (
        done.returncode == 1
        and "migration(s) this version brings (sources.0005_source_cited_name" in done.stderr
        and "manage.py migrate" in done.stderr
    ), done.stderr
    assert foundry(env, "init").returncode == 1  # still refused: nothing migrated it behind the operator's back


def test_init_creates_the_admin_opens_the_team_collection_and_says_what_next(tmp_path: Path) -> None:
    env = {
        **foundry_env(tmp_path / "home", tmp_path / "home" / "foundry.sqlite3"),
        "FOUNDRY_ADMIN_PASSWORD": "a long enough password",
    }
    done = foundry(env, "init", "--admin", "alice", "--team")
    assert done.returncode == 0, done.stderr
    assert "Created the admin account alice." in done.stdout
    assert "Collection default is now readable by every signed-in user" in done.stdout
    assert "foundry ingest" in done.stdout and "http://127.0.0.1:8000/" in done.stdout
    assert "sign in as alice" in done.stdout
    listing = foundry(env, "collections", "list").stdout
    assert any(line.split()[:2] == ["default", "yes"] for line in listing.splitlines()), listing
    check = subprocess.run(
        [
            sys.executable,
            "manage.py",
            "shell",
            "-c",
            "from django.contrib.auth.models import User; u = User.objects.get(username='alice'); "
            "print(u.is_superuser, u.check_password('a long enough password'))",
        ],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    assert check.stdout.strip().endswith("True True"), check.stdout
    again = foundry(env, "init", "--admin", "alice")
    assert again.returncode == 1 and "already exists" in again.stderr


@pytest.mark.parametrize(("password", "message"), [(None, "set FOUNDRY_ADMIN_PASSWORD"), ("short", "too short")])
def test_init_without_a_usable_password_creates_no_admin(tmp_path: Path, password: str | None, message: str) -> None:
    env = foundry_env(tmp_path / "home", tmp_path / "home" / "foundry.sqlite3")
    env.pop("FOUNDRY_ADMIN_PASSWORD", None)
    if password:
        env["FOUNDRY_ADMIN_PASSWORD"] = password
    done = subprocess.run(
        [sys.executable, "-c", CLI, "init", "--admin", "bob"],
        env=env,
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 1 and message in done.stderr, done.stderr
    count = sqlite3.connect(tmp_path / "home" / "foundry.sqlite3").execute("SELECT count(*) FROM auth_user")
    assert count.fetchone()[0] == 0


@pytest.mark.django_db
def test_next_step_after_ingest_names_both_ways_to_ask(make_user: object) -> None:
    from foundry_site.cli.ingest import next_step

    assert "foundry query" in next_step() and "foundry init --admin NAME" in next_step()
    make_user("alice")  # type: ignore[operator]
    assert "foundry serve, then open http://127.0.0.1:8000/" in next_step() and "init" not in next_step()


def test_the_next_steps_count_the_documents_already_indexed() -> None:
    from foundry_site.cli.init import next_steps

    assert "# add your documents (default: " in next_steps(admin="alice", indexed=0)
    assert "# 4 documents indexed; again when they change" in next_steps(admin="alice", indexed=4)
    assert "# 1 document indexed;" in next_steps(admin=None, indexed=1)
