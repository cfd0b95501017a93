"""``python manage.py foundry <command>``: ingest, export, query, generate, eval, …"""

from __future__ import annotations

import argparse
from typing import Any

from django.conf import settings
from django.core.checks.registry import registry as check_registry
from django.core.management.base import BaseCommand, CommandError, OutputWrapper
from django.db import DatabaseError

from foundry_site.cli.display import TerminalSafe, database_error_message, safe_text
from foundry_site.cli import (
    audit,
    backup,
    collections,
    evaluate,
    generate,
    ingest,
    init,
    jobs,
    mcp_server,
    query,
    serve,
    specs,
    store,
    sync,
    tokens,
)
from foundry_site.db.checks import INDEX_TAG
from foundry_site.services.setup import DatabaseNotReady, database_prepare

# Each module adds its sub-commands with add_parsers(sub); append new modules here.
COMMAND_MODULES = [
    init,
    ingest,
    sync,
    query,
    generate,
    specs,
    tokens,
    collections,
    jobs,
    serve,
    evaluate,
    mcp_server,
    audit,
    backup,
    store,
]
# Sub-commands that search the index: they refuse to start when it was embedded with
# another model than foundry.yaml names (check foundry.E004). Every other sub-command
# must still run then: `ingest` is the fix, `check` and `status` report the problem.
SEARCHING_COMMANDS = {"query", "generate", "serve", "mcp"}
# Sub-commands that handle the database file themselves: no database is created or checked first (a backup
# must be possible before an upgrade's migrations, a restore must find a new home empty).
FILE_COMMANDS = {"backup", "restore"}


def database_ready(stderr: Any) -> None:
    """Create and migrate a new (empty or absent) database; refuse, naming the command, one that lacks migrations."""
    if settings.FOUNDRY_COMPUTE_ONLY:  # a compute worker never opens the database
        return
    try:
        state = database_prepare()
    except DatabaseNotReady as exc:
        raise CommandError(str(exc)) from None
    except DatabaseError as exc:  # a damaged file, a full disk, a lock held too long
        raise CommandError(database_error_message(exc)) from None
    if state.created:
        stderr.write(f"Created a new knowledge base at {state.path}.")


class Command(BaseCommand):
    help = "Foundry: a source-bounded knowledge base."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        if parser.prog == "foundry foundry":  # the `foundry` script (cli.main); `manage.py foundry` keeps its name
            parser.prog = "foundry"
        sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
        for module in COMMAND_MODULES:
            module.add_parsers(sub)

    def execute(self, *args: Any, **options: Any) -> Any:
        if options.get("command") in FILE_COMMANDS:
            self.requires_system_checks = []
            return super().execute(*args, **options)
        # Before the system checks, which read tables: a new home gets its database here.
        database_ready(OutputWrapper(options["stderr"]) if options.get("stderr") else self.stderr)
        if options.get("command") not in SEARCHING_COMMANDS:
            self.requires_system_checks = sorted(check_registry.tags_available() - {INDEX_TAG})
        return super().execute(*args, **options)

    def handle(self, *args: Any, **options: Any) -> None:
        opts = argparse.Namespace(**options)
        try:
            # Every command prints documents' text, names or titles somewhere: the one filter
            # on stdout keeps their control characters off the terminal (display.py).
            code = opts.handler(opts, TerminalSafe(self.stdout))
        except CommandError as exc:  # messages name files and quote model or provider text
            raise CommandError(safe_text(str(exc)), returncode=exc.returncode) from None
        except (FileNotFoundError, ValueError) as exc:
            raise CommandError(safe_text(str(exc))) from None
        except DatabaseError as exc:  # disk full, a lock held too long, a damaged file: say which, and what to do
            raise CommandError(database_error_message(exc)) from None
        if code:
            raise SystemExit(code)
