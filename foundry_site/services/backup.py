"""Backups of a knowledge base, and restoring one into a home (``foundry backup`` / ``foundry restore``).

A backup is one tar file holding what a restore needs to serve the same answers and originals:

- ``foundry.sqlite3``: the database, copied with SQLite's online backup API, so it is consistent while the server
  runs (sources, chunks with their FTS and vector tables, users, tokens, specs, the query log, the runs);
- ``home/uploads/``: the originals uploaded through the web or the API (the source viewer serves them);
- ``home/outputs/``, ``home/artifacts/``, ``home/runs.csv``: generated documents and the run records kept
  beside the database;
- ``manifest.json``: the format, the home it came from, the migrations applied, the rows per table and the SHA-256
  of every member, so a restore can prove the archive whole before it touches anything.

Sources ingested from folders outside FOUNDRY_HOME (the knowledge base, bound folders) are the user's own files and
are not copied: the manifest names them with their SHA-256, and a restore reports any that are missing or changed.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tarfile
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pysqlite3.dbapi2 as sqlite
from django.conf import settings
from django.db import connection
from django.utils import timezone

FORMAT = 1
DB_MEMBER = "foundry.sqlite3"
MANIFEST = "manifest.json"
HOME_DIRS = ("uploads", "outputs", "artifacts")
HOME_FILES = ("runs.csv",)
# Tables whose rows make a knowledge base worth keeping: a restore refuses to replace a database holding any.
KEPT_TABLES = ("sources_source", "retrieval_querylog", "generation_generationrun", "auth_user", "specs_featurespec")


class BackupError(Exception):
    """The backup or restore cannot be done; the message names the file and the reason. Nothing was changed."""


@dataclass
class BackupSummary:
    path: Path
    tables: dict[str, int]
    files: int
    external: int  # sources kept outside FOUNDRY_HOME, referenced, not copied


@dataclass
class RestoreSummary:
    path: Path
    tables: dict[str, int]
    files: int
    migrated: list[str] = field(default_factory=list)
    external_missing: list[str] = field(default_factory=list)
    set_aside: Path | None = None
    chains_broken: list[str] = field(default_factory=list)  # restored as it was; `foundry audit verify` tells where


def _sqlite_only() -> Path:
    if connection.vendor != "sqlite":
        raise BackupError(
            f"foundry backup and restore support only SQLite; this install uses {connection.vendor}. "
            "Back that database up with its own tools (for PostgreSQL, pg_dump and pg_restore)."
        )
    return Path(str(connection.settings_dict["NAME"]))


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _tables(db: sqlite.Connection) -> dict[str, int]:
    names = [r[0] for r in db.execute("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name")]
    # Virtual tables (FTS5, vec0) need their modules to be read; their shadow tables are counted instead.
    plain = [n for n in names if not db.execute("SELECT sql FROM sqlite_schema WHERE name = ?", [n]).fetchone()[0]
             .upper().startswith("CREATE VIRTUAL")]  # fmt: skip
    return {n: db.execute(f'SELECT count(*) FROM "{n}"').fetchone()[0] for n in plain}


def _home_files(home: Path) -> Iterator[tuple[Path, str]]:
    """Every file the backup carries from the home, with its name in the archive."""
    for name in HOME_FILES:
        if (home / name).is_file():
            yield home / name, f"home/{name}"
    for folder in HOME_DIRS:
        for path in sorted((home / folder).rglob("*")):
            if path.is_file() and not path.is_symlink():
                yield path, f"home/{path.relative_to(home).as_posix()}"


def _external_sources(home: Path) -> list[dict[str, str]]:
    from sources.models import Source

    found = []
    for root, path, sha in Source.objects.filter(status="ingested").values_list("root", "path", "sha256"):
        where = Path(root) / path
        if not where.is_relative_to(home):
            found.append({"path": str(where), "sha256": sha})
    return found


def backup_create(*, target: Path) -> BackupSummary:
    """Write a backup of this knowledge base to ``target`` (a new file): written beside it under a temporary name and
    renamed when complete, so ``target`` is either a whole backup or absent. Safe while the server runs."""
    db_path = _sqlite_only()
    if target.exists():
        raise BackupError(f"{target} already exists; choose a new file name (a backup never overwrites a file).")
    if not db_path.is_file():
        raise BackupError(f"There is no knowledge base at {db_path} to back up.")
    home = Path(settings.FOUNDRY_HOME)
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".foundry-backup-") as work:
        copy = Path(work) / DB_MEMBER
        source, dest = sqlite.connect(str(db_path)), sqlite.connect(str(copy))
        try:
            source.backup(dest)  # one read transaction: a consistent snapshot while writers go on (WAL)
            dest.execute("PRAGMA journal_mode=DELETE")  # one self-contained file, no -wal beside it
            tables = _tables(dest)
            applied = [f"{a}.{n}" for a, n in dest.execute("SELECT app, name FROM django_migrations ORDER BY id")]
        finally:
            source.close()
            dest.close()
        files = list(_home_files(home))  # after the snapshot: every file a snapshot row names is there
        external = _external_sources(home)
        manifest = {
            "format": FORMAT,
            "created_at": timezone.now().isoformat(),
            "home": str(home),
            "media_root": str(settings.MEDIA_ROOT),
            "migrations": applied,
            "tables": tables,
            "members": {DB_MEMBER: _sha256(copy), **{name: _sha256(path) for path, name in files}},
            "external_sources": external,
        }
        partial = Path(work) / "backup.tar"
        with tarfile.open(partial, "w") as tar:
            data = json.dumps(manifest, indent=1, ensure_ascii=False).encode("utf-8")
            (Path(work) / MANIFEST).write_bytes(data)
            tar.add(Path(work) / MANIFEST, arcname=MANIFEST)
            tar.add(copy, arcname=DB_MEMBER)
            for path, name in files:
                tar.add(path, arcname=name)
        os.replace(partial, target)
    return BackupSummary(target, tables, len(files), len(external))


# --------------------------------------------------------------------------- restore


def _holds_data(db_path: Path) -> list[str]:
    """The tables of KEPT_TABLES that hold rows in the database at ``db_path`` (none when it is absent)."""
    if not db_path.is_file() or db_path.stat().st_size == 0:
        return []
    db = sqlite.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        present = {r[0] for r in db.execute("SELECT name FROM sqlite_schema WHERE type = 'table'")}
        return [t for t in KEPT_TABLES if t in present and db.execute(f'SELECT 1 FROM "{t}" LIMIT 1').fetchone()]
    finally:
        db.close()


def _unpack(archive: Path, into: Path) -> dict[str, Any]:
    """Extract the archive and check every member against the manifest; the manifest."""
    try:
        with tarfile.open(archive, "r") as tar:
            tar.extractall(into, filter="data")  # no absolute paths, no "..", no links out, no devices
    except (tarfile.TarError, OSError) as exc:
        raise BackupError(f"{archive} is not a readable Foundry backup: {exc}") from None
    try:
        manifest = json.loads((into / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise BackupError(f"{archive} has no readable {MANIFEST}: it is not a Foundry backup ({exc}).") from None
    if manifest.get("format") != FORMAT:
        raise BackupError(f"{archive}: backup format {manifest.get('format')!r} is not one this version reads.")
    for name, sha in manifest["members"].items():
        member = into / name
        if not member.is_file() or _sha256(member) != sha:
            raise BackupError(f"{archive}: {name} is missing or does not match its SHA-256 in the manifest.")
    return manifest


def _database_check(archive: Path, db_path: Path, manifest: dict[str, Any]) -> None:
    """integrity_check, a Foundry schema, and migrations this code knows."""
    from django.db.migrations.loader import MigrationLoader

    db = sqlite.connect(str(db_path))
    try:
        check = db.execute("PRAGMA integrity_check").fetchall()
        if check != [("ok",)]:
            raise BackupError(f"{archive}: the database fails PRAGMA integrity_check: {check[:3]}")
        present = {r[0] for r in db.execute("SELECT name FROM sqlite_schema WHERE type = 'table'")}
        if not {"django_migrations", *KEPT_TABLES} <= present:
            raise BackupError(f"{archive}: the database is not a Foundry knowledge base (its tables are missing).")
        applied = {f"{a}.{n}" for a, n in db.execute("SELECT app, name FROM django_migrations")}
    except sqlite.DatabaseError as exc:  # too damaged for integrity_check to run
        raise BackupError(f"{archive}: the database fails PRAGMA integrity_check: {exc}") from None
    finally:
        db.close()
    known = {f"{a}.{n}" for a, n in MigrationLoader(None, ignore_no_migrations=True).disk_migrations}
    newer = sorted(applied - known)
    if newer:
        raise BackupError(
            f"{archive} was made by a newer Foundry: this version lacks {len(newer)} of its migrations "
            f"({', '.join(newer[:3])}). Upgrade Foundry, then restore."
        )
    if applied != set(manifest["migrations"]):
        raise BackupError(f"{archive}: the database's migrations differ from those its manifest names.")


def _paths_move(manifest: dict[str, Any]) -> None:
    """Point uploaded sources and generated documents at this home (on the restored copy, bound by the caller)."""
    from django.db.models import Value
    from django.db.models.functions import Concat, Substr

    from generation.models import GenerationRun
    from sources.models import Source

    for model, column, old, new in (
        (Source, "root", manifest["media_root"], str(settings.MEDIA_ROOT)),
        (GenerationRun, "output_path", manifest["home"], str(settings.FOUNDRY_HOME)),
    ):
        old, new = old.rstrip("/"), new.rstrip("/")
        if old == new:
            continue
        rows = model.objects.filter(**{f"{column}__startswith": f"{old}/"})
        # A run's hash counts its output path relative to the home (generation/audit_chain.py): this keeps it whole.
        rows.update(**{column: Concat(Value(new), Substr(column, len(old) + 1))})
        model.objects.filter(**{column: old}).update(**{column: new})


def backup_restore(*, archive: Path, force: bool = False) -> RestoreSummary:
    """Restore ``archive`` into this FOUNDRY_HOME.

    Refuses (BackupError, nothing changed) a knowledge base that holds data unless ``force``; then the database and
    the home folders it replaces are moved aside into ``FOUNDRY_HOME/before-restore-<time>/``, never deleted. The
    archive is checked whole first (every member's SHA-256, PRAGMA integrity_check, a Foundry schema, migrations
    this version knows), migrated to this version on a temporary copy, and renamed into place last, so a failure
    leaves the old database as it was. The server must be stopped while it runs.
    """
    from foundry_site.db.switch import database_use
    from generation.audit_chain import audit_verify

    db_path = _sqlite_only()
    if not archive.is_file():
        raise BackupError(f"There is no backup at {archive}.")
    held = _holds_data(db_path)
    if held and not force:
        raise BackupError(
            f"The knowledge base {db_path} already holds data ({', '.join(held)}); restore into a new FOUNDRY_HOME, "
            "or pass --force to replace it (the current files are moved aside, not deleted)."
        )
    home = Path(settings.FOUNDRY_HOME)
    in_the_way = [name for name in (*HOME_DIRS, *HOME_FILES) if _not_empty(home / name)]
    if in_the_way and not force:
        raise BackupError(
            f"{home} already holds {', '.join(in_the_way)}; restore into a new FOUNDRY_HOME, or pass --force "
            "(the current files are moved aside, not deleted)."
        )
    with tempfile.TemporaryDirectory(dir=home, prefix=".foundry-restore-") as work:
        unpacked = Path(work)
        manifest = _unpack(archive, unpacked)
        restored = unpacked / DB_MEMBER
        _database_check(archive, restored, manifest)
        connection.close()
        with database_use(restored):  # migrates a backup from an older version, on the copy
            _paths_move(manifest)
            broken = [r.chain for r in audit_verify() if not r.ok]
        _self_contained(restored)
        migrated = sorted(set(_applied(restored)) - set(manifest["migrations"]))
        aside = _set_aside(home, db_path) if force else None
        for folder in [*HOME_DIRS, *HOME_FILES]:
            if (unpacked / "home" / folder).exists():
                os.replace(unpacked / "home" / folder, home / folder)
        os.replace(restored, db_path)  # last: the database in place means the restore is complete
    files = len(manifest["members"]) - 1
    missing = [s["path"] for s in manifest["external_sources"] if not _same_file(Path(s["path"]), s["sha256"])]
    return RestoreSummary(db_path, manifest["tables"], files, migrated, missing, aside, broken)


def _not_empty(path: Path) -> bool:
    return path.is_file() or (path.is_dir() and any(path.iterdir()))


def _self_contained(db_path: Path) -> None:
    """Fold the write-ahead log into the file, so the one file renamed into place is the whole database."""
    db = sqlite.connect(str(db_path))
    try:
        db.execute("PRAGMA journal_mode=DELETE")
    finally:
        db.close()


def _applied(db_path: Path) -> list[str]:
    db = sqlite.connect(str(db_path))
    try:
        return [f"{a}.{n}" for a, n in db.execute("SELECT app, name FROM django_migrations")]
    finally:
        db.close()


def _set_aside(home: Path, db_path: Path) -> Path | None:
    """Move what a forced restore replaces into one folder; None when there was nothing to move."""
    aside = home / f"before-restore-{timezone.now().strftime('%Y%m%d-%H%M%S')}"
    moved = False
    for path in [
        db_path,
        Path(f"{db_path}-wal"),
        Path(f"{db_path}-shm"),
        *(home / n for n in (*HOME_DIRS, *HOME_FILES)),
    ]:
        if path.exists():
            aside.mkdir(parents=True, exist_ok=True)
            shutil.move(str(path), aside / path.name)
            moved = True
    return aside if moved else None


def _same_file(path: Path, sha: str) -> bool:
    return path.is_file() and _sha256(path) == sha
