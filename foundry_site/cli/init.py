"""``foundry init``: set up a knowledge base and its first admin, then say what to do next."""

from __future__ import annotations

import argparse
import getpass
import os
import sys
from typing import TextIO

from django.conf import settings
from django.core.management import CommandError

from foundry_site.cli.display import safe
from foundry_site.services.setup import admin_create, database_path, team_collection_open
from sources.models import Source

PASSWORD_VARIABLE = "FOUNDRY_ADMIN_PASSWORD"
WEB_URL = "http://127.0.0.1:8000/"


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("init", help="set up the knowledge base (database, first admin) and print the next steps")
    p.add_argument(
        "--admin",
        metavar="NAME",
        default=None,
        help=f"create this superuser (password from {PASSWORD_VARIABLE}, else a prompt)",
    )
    p.add_argument("--email", default="", help="the admin's e-mail address")
    p.add_argument(
        "--team", action="store_true", help="one-team install: every signed-in user may read the `default` collection"
    )
    p.set_defaults(handler=init_command)


def admin_password() -> str:
    """The admin's password: the environment variable, else typed twice at a terminal."""
    if os.environ.get(PASSWORD_VARIABLE):
        return os.environ[PASSWORD_VARIABLE]
    if not sys.stdin.isatty():
        raise CommandError(f"No password for the admin: set {PASSWORD_VARIABLE} or run `foundry init` in a terminal.")
    first = getpass.getpass("Admin password: ")
    if first != getpass.getpass("Admin password (again): "):
        raise CommandError("The two passwords differ; nothing was created.")
    return first


def init_command(opts: argparse.Namespace, out: TextIO) -> int:
    # The database itself was created (or found ready) before any command runs (management command).
    out.write(f"Knowledge base: {database_path()} (FOUNDRY_HOME={settings.FOUNDRY_HOME})\n")
    if opts.admin is not None:
        try:
            user = admin_create(username=opts.admin, password=admin_password(), email=opts.email)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        out.write(f"Created the admin account {safe(user.get_username())}.\n")
    if opts.team:
        collection, changed = team_collection_open()
        state = "is now" if changed else "already was"
        out.write(f"Collection {collection.name} {state} readable by every signed-in user (one-team install).\n")
    out.write(next_steps(admin=opts.admin, indexed=Source.objects.count()))
    return 0


def next_steps(*, admin: str | None, indexed: int) -> str:
    """What to do after ``foundry init``; ``indexed``: the documents the knowledge base holds already."""
    sign_in = f"sign in as {admin}" if admin else "sign in (create an account first: `foundry init --admin NAME`)"
    ingest = (
        f"{indexed} document{'' if indexed == 1 else 's'} indexed; again when they change"
        if indexed
        else f"add your documents (default: {settings.FOUNDRY_KNOWLEDGE_BASE})"
    )
    return (
        "\nNext steps:\n"
        f"  1. foundry ingest [FOLDER]      # {ingest}\n"
        "  2. foundry serve                # start the web UI\n"
        f"  3. open {WEB_URL} and {sign_in}\n"
        '     or ask from here: foundry query "your question"\n'
        f"  4. add your team's accounts in {WEB_URL}admin/ (Users → Add user)\n"
    )
