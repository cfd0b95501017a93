"""``python manage.py foundry <command>``: ingest, export, query, generate, eval, …"""
from __future__ import annotations

import argparse
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError

from foundry_site.cli.display import database_error_message
from foundry_site.cli import collections, evaluate, generate, ingest, jobs, query, serve, specs, tokens

# Each module adds its sub-commands with add_parsers(sub); append new modules here.
COMMAND_MODULES = [ingest, query, generate, specs, tokens, collections, jobs, serve, evaluate]


class Command(BaseCommand):
    help = "Foundry: a source-bounded knowledge base."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
        for module in COMMAND_MODULES:
            module.add_parsers(sub)

    def handle(self, *args: Any, **options: Any) -> None:
        opts = argparse.Namespace(**options)
        try:
            code = opts.handler(opts, self.stdout)
        except (FileNotFoundError, ValueError) as exc:
            raise CommandError(str(exc)) from None
        except DatabaseError as exc:  # disk full, a lock held too long, a damaged file: say which, and what to do
            raise CommandError(database_error_message(exc)) from None
        if code:
            raise SystemExit(code)
