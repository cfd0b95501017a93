"""Setting up a knowledge base: its database on first use, the first admin, a one-team install."""

from __future__ import annotations

import contextlib
import fcntl
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.contrib.auth.password_validation import validate_password
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from sources.models import Collection
from sources.services.ingest import DEFAULT_COLLECTION

logger = logging.getLogger(__name__)


class DatabaseNotReady(Exception):
    """The database is from an older version (pending migrations) or is not Foundry's: it is left alone."""


@dataclass(frozen=True)
class DatabaseState:
    path: str
    created: bool  # this call created and migrated it


SETUP_LOCK_KEY = 0x466F756E  # PostgreSQL advisory lock key of database setup ("Foun")


def database_path() -> Path:
    return Path(str(connection.settings_dict["NAME"]))


def database_label() -> str:
    """The database as messages name it: the SQLite file, or PostgreSQL's host and database name."""
    if connection.vendor == "sqlite":
        return str(database_path())
    conn = connection.settings_dict
    return f"PostgreSQL database {conn['NAME']} at {conn['HOST'] or 'the default socket'}"


@contextlib.contextmanager
def _setup_lock(db_path: Path) -> Iterator[None]:
    """An exclusive fcntl lock beside the database, so that two processes started together
    (two `foundry` commands, gunicorn workers) neither migrate at once nor read half-built tables.
    On PostgreSQL, whose clients may be on several machines, a session advisory lock of the server."""
    if connection.vendor != "sqlite":
        with connection.cursor() as cur:
            cur.execute("SELECT pg_advisory_lock(%s)", [SETUP_LOCK_KEY])
            try:
                yield
            finally:
                cur.execute("SELECT pg_advisory_unlock(%s)", [SETUP_LOCK_KEY])
        return
    db_path.parent.mkdir(parents=True, exist_ok=True)
    with open(f"{db_path}.setup-lock", "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def pending_migrations() -> tuple[list[str], bool]:
    """The migrations the database lacks (``app.name``), and whether any migration was ever applied."""
    executor = MigrationExecutor(connection)
    plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    return [f"{m.app_label}.{m.name}" for m, _ in plan], bool(executor.loader.applied_migrations)


def database_prepare() -> DatabaseState:
    """Make the database usable, creating it when it is new.

    A database with no tables at all (a new ``FOUNDRY_HOME``, or the empty file an older
    version left behind) is created and fully migrated under a file lock; a second process
    waits for the first and then finds it ready. A database that already holds data and
    lacks migrations is never changed here: ``DatabaseNotReady`` names them and the command
    to run, so an upgrade happens when its operator chooses (after a backup). Idempotent.
    """
    path, label = database_path(), database_label()
    with _setup_lock(path):
        if not connection.introspection.table_names():
            logger.info("creating a new knowledge base database: %s", label)
            call_command("migrate", interactive=False, verbosity=0)
            return DatabaseState(path=label, created=True)
        pending, applied = pending_migrations()
    if pending:
        state = (
            f"needs {len(pending)} migration(s) this version brings ({', '.join(pending[:3])}"
            f"{', …' if len(pending) > 3 else ''})"
            if applied
            else "is not set up"
        )
        raise DatabaseNotReady(
            f"The knowledge base {label} {state}: run `.venv/bin/python manage.py migrate` "
            "with the same FOUNDRY_HOME first (back up the file before you upgrade it)."
        )
    return DatabaseState(path=label, created=False)


def admin_create(*, username: str, password: str, email: str = "") -> User:
    """Create the first superuser. Refuses (ValueError) a taken name or a password the validators reject."""
    from django.core.exceptions import ValidationError

    users = get_user_model()
    if not username.strip():
        raise ValueError("The admin name may not be empty.")
    if users.objects.filter(username=username).exists():
        raise ValueError(f"A user named {username!r} already exists; it was left unchanged.")
    user = users(username=username, email=email)
    try:
        validate_password(password, user)
    except ValidationError as exc:
        raise ValueError(" ".join(exc.messages)) from None
    return users.objects.create_superuser(username, email, password)


def team_collection_open() -> tuple[Collection, bool]:
    """The one-team install: the ``default`` collection, created if needed, readable by every signed-in user.

    Returns the collection and whether this call changed it. Idempotent.
    """
    collection, created = Collection.objects.get_or_create(name=DEFAULT_COLLECTION, defaults={"public": True})
    if created:
        return collection, True
    if collection.public:
        return collection, False
    Collection.objects.filter(pk=collection.pk).update(public=True)
    collection.refresh_from_db()
    return collection, True
