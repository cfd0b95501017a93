"""``foundry backup PATH`` and ``foundry restore PATH [--force]`` (foundry_site/services/backup.py)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TextIO

from django.core.management import CommandError

from foundry_site.services.backup import BackupError, backup_create, backup_restore


def add_parsers(sub: argparse._SubParsersAction) -> None:
    b = sub.add_parser(
        "backup",
        help="write a backup (one tar file: the database, uploaded originals, generated documents, run records); "
        "safe while the server runs",
    )
    b.add_argument("path", type=Path, metavar="PATH", help="the backup file to write; it must not exist")
    b.set_defaults(handler=backup_command)
    r = sub.add_parser("restore", help="restore a backup into this FOUNDRY_HOME (stop the server first)")
    r.add_argument("path", type=Path, metavar="PATH", help="a file written by foundry backup")
    r.add_argument(
        "--force",
        action="store_true",
        help="replace a knowledge base that holds data; what it replaces is moved to FOUNDRY_HOME/before-restore-…",
    )
    r.set_defaults(handler=restore_command)


def backup_command(opts: argparse.Namespace, out: TextIO) -> int:
    try:
        done = backup_create(target=opts.path)
    except BackupError as exc:
        raise CommandError(str(exc)) from None
    rows = sum(done.tables.values())
    out.write(f"Backed up {len(done.tables)} tables ({rows} rows) and {done.files} files to {done.path}.\n")
    if done.external:
        out.write(
            f"{done.external} sources were ingested from folders outside FOUNDRY_HOME: they are named, not copied; "
            "back those folders up too.\n"
        )
    return 0


def restore_command(opts: argparse.Namespace, out: TextIO) -> int:
    try:
        done = backup_restore(archive=opts.path, force=opts.force)
    except BackupError as exc:
        raise CommandError(str(exc)) from None
    rows = sum(done.tables.values())
    out.write(f"Restored {len(done.tables)} tables ({rows} rows) and {done.files} files into {done.path}.\n")
    if done.set_aside:
        out.write(f"What it replaced was moved to {done.set_aside}.\n")
    if done.migrated:
        out.write(f"Migrated to this version: {', '.join(done.migrated)}.\n")
    for chain in done.chains_broken:
        out.write(f"Warning: the {chain} audit chain of the backup does not verify; run foundry audit verify.\n")
    if done.external_missing:
        out.write(f"{len(done.external_missing)} originals outside FOUNDRY_HOME are missing or changed, e.g. "
                  f"{done.external_missing[0]}: their answers are served, their originals are not.\n")  # fmt: skip
    return 0
