"""Run a block of code against another SQLite file (the eval commands' own indexes).

Every query in the project goes through the ``default`` connection, so for the
duration of the block that alias is bound to a fresh connection to ``path``
(migrated first); the previous connection is put back untouched afterwards,
even if it was inside a transaction. Thread-local, like Django's connections. The file is SQLite on
either store: with ``FOUNDRY_DATABASE_URL`` set it takes the SQLite settings (``FOUNDRY_SQLITE_DATABASE``).
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator
from pathlib import Path

from django.conf import settings
from django.contrib.contenttypes.models import ContentType
from django.core.management import call_command
from django.db import DEFAULT_DB_ALIAS, connections
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
