"""``python manage.py foundry <command>``: ingest, export, query, generate, eval, …"""
from __future__ import annotations

import argparse
from typing import Any

from django.conf import settings
from django.core.checks.registry import registry as check_registry
from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError, connection
from django.db.migrations.executor import MigrationExecutor

from foundry_site.cli.display import TerminalSafe, database_error_message, safe_text
from foundry_site.cli import collections, evaluate, generate, ingest, jobs, mcp_server, query, serve, specs, tokens
from foundry_site.db.checks import INDEX_TAG

# Each module adds its sub-commands with add_parsers(sub); append new modules here.
COMMAND_MODULES = [ingest, query, generate, specs, tokens, collections, jobs, serve, evaluate, mcp_server]
# Sub-commands that search the index: they refuse to start when it was embedded with
# another model than foundry.yaml names (check foundry.E004). Every other sub-command
# must still run then: `ingest` is the fix, `check` and `status` report the problem.
SEARCHING_COMMANDS = {"query", "generate", "serve", "mcp"}


def migrations_check() -> None:
    """CommandError naming the migrations the default database lacks: the code expects their tables and columns."""
    executor = MigrationExecutor(connection)
    pending = [f"{migration.app_label}.{migration.name}"
               for migration, _ in executor.migration_plan(executor.loader.graph.leaf_nodes())]
    if not pending:
        return
    state = (f"needs {len(pending)} migration(s) this version brings ({', '.join(pending[:3])}"
             f"{', …' if len(pending) > 3 else ''})" if executor.loader.applied_migrations else "is not set up")
    raise CommandError(f"The knowledge base {settings.DATABASES['default']['NAME']} {state}: run "
                       "`.venv/bin/python manage.py migrate` with the same FOUNDRY_HOME first "
                       "(`make run` does it for the default home).")


class Command(BaseCommand):
    help = "Foundry: a source-bounded knowledge base."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        if parser.prog == "foundry foundry":  # the `foundry` script (cli.main); `manage.py foundry` keeps its name
            parser.prog = "foundry"
        sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
        for module in COMMAND_MODULES:
            module.add_parsers(sub)

    def execute(self, *args: Any, **options: Any) -> Any:
        if options.get("command") not in SEARCHING_COMMANDS:
            self.requires_system_checks = sorted(check_registry.tags_available() - {INDEX_TAG})
        return super().execute(*args, **options)

    def handle(self, *args: Any, **options: Any) -> None:
        opts = argparse.Namespace(**options)
        try:
            migrations_check()  # after the configuration checks, before anything reads a table
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
