"""``foundry copy-sqlite PATH``: copy a SQLite knowledge base into PostgreSQL (foundry_site/services/store_copy.py)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TextIO

from django.core.management import CommandError

from foundry_site.services.store_copy import CopyError, sqlite_copy


def add_parsers(sub: argparse._SubParsersAction) -> None:
    c = sub.add_parser(
        "copy-sqlite",
        help="copy a SQLite knowledge base (foundry.sqlite3) into the empty PostgreSQL database FOUNDRY_DATABASE_URL "
        "names, checking every table's row count",
    )
    c.add_argument("path", type=Path, metavar="PATH", help="the SQLite file, e.g. var/foundry.sqlite3 (only read)")
    c.set_defaults(handler=copy_command)


def copy_command(opts: argparse.Namespace, out: TextIO) -> int:
    try:
        done = sqlite_copy(path=opts.path)
    except CopyError as exc:
        raise CommandError(str(exc)) from None
    rows, vectors = sum(done.tables.values()), sum(done.vectors.values())
    out.write(
        f"Copied {len(done.tables)} tables ({rows} rows), {len(done.vectors)} vector tables ({vectors} vectors) and "
        f"{done.keyword_rows} keyword rows from {opts.path}; every count matches the file.\n"
    )
    return 0
