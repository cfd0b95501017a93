"""``foundry backup`` / ``foundry restore`` in real processes: a knowledge base ingested and asked, backed up, restored
into a new home; every table the same, the same question answered the same way, originals served; and the refusals
(a home that holds data, a damaged or foreign archive) that leave everything as it was."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pysqlite3
import pytest

REPO = Path(__file__).resolve().parents[2]
CLI = "from foundry_site.cli import main; main()"
QUESTION = "How many sensors can the bus carry?"


def foundry_env(home: Path) -> dict[str, str]:
    home.mkdir(parents=True, exist_ok=True)
    config = home / "foundry.yaml"
    config.write_text("ingest:\n  summary_model: none\nembedding:\n  context_model: none\nretrieval:\n  hyde: false\n")
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "foundry_site.settings",
        "PYTHONPATH": str(REPO),
        "FOUNDRY_HOME": str(home),
        "FOUNDRY_CONFIG": str(config),
    }
    for name in ("FOUNDRY_BROKER_URL", "FOUNDRY_DB"):
        env.pop(name, None)
    return env


def foundry(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", CLI, *args], env=env, cwd=REPO, capture_output=True, text=True, timeout=900
    )


def ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, (done.stdout, done.stderr)
    return done.stdout


def tables(db: Path) -> dict[str, list[tuple]]:
    """Every row of every plain table (virtual tables are read through their shadow tables)."""
    con = pysqlite3.connect(str(db))
    try:
        names = [
            n
            for n, sql in con.execute("SELECT name, sql FROM sqlite_schema WHERE type = 'table'")
            if not sql.upper().startswith("CREATE VIRTUAL")
        ]
        return {n: sorted(con.execute(f'SELECT * FROM "{n}"').fetchall(), key=repr) for n in names}
    finally:
        con.close()


def answer(env: dict[str, str], *args: str) -> dict:
    shown = json.loads(ok(foundry(env, "query", QUESTION, "--json", *args)))
    return {k: shown[k] for k in ("answer", "answer_class", "citations", "cached")}


@pytest.fixture(scope="module")
def backed_up(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, str], Path, dict]:
    """A home with an ingested folder, an uploaded original, one question asked; and its backup."""
    root = tmp_path_factory.mktemp("backup")
    kb = root / "kb"
    kb.mkdir()
    (kb / "bus.md").write_text("# Bus\n\nUp to 8 sensors can be connected to the field bus.\n", encoding="utf-8")
    (kb / "power.md").write_text("# Power\n\nThe controller runs on 24 V DC.\n", encoding="utf-8")
    env = foundry_env(root / "home")
    ok(foundry(env, "ingest", str(kb)))
    uploads = root / "home" / "uploads" / "default"
    uploads.mkdir(parents=True)
    (uploads / "notes.txt").write_text("Cable length is at most 100 m.\n", encoding="utf-8")
    ok(foundry(env, "ingest", str(uploads)))
    before = answer(env)
    ok(foundry(env, "backup", str(root / "kb.tar")))
    return env, root, before


def test_a_restored_home_holds_the_same_tables_and_answers_the_same(
    backed_up: tuple[dict[str, str], Path, dict],
) -> None:
    env, root, before = backed_up
    assert before["answer_class"] != "no_evidence" and before["citations"]
    new = foundry_env(root / "restored")
    out = ok(foundry(new, "restore", str(root / "kb.tar")))
    assert "Restored" in out
    old_rows, new_rows = tables(root / "home" / "foundry.sqlite3"), tables(root / "restored" / "foundry.sqlite3")
    assert old_rows.keys() == new_rows.keys() and "retrieval_querylog" in old_rows
    # The uploaded source now lives in the new home; every other row is as it was.
    old_home, new_home = str(root / "home"), str(root / "restored")
    old_rows["sources_source"] = sorted(
        (tuple(str(v).replace(old_home, new_home) for v in r) for r in old_rows["sources_source"]), key=repr
    )
    new_rows["sources_source"] = sorted((tuple(map(str, r)) for r in new_rows["sources_source"]), key=repr)
    assert new_rows == old_rows
    assert (root / "restored" / "uploads" / "default" / "notes.txt").read_text() == "Cable length is at most 100 m.\n"
    assert answer(new) == {**before, "cached": True}  # the logged answer, found in the restored log
    # Asked afresh (another mode: not in the cache), the restored index answers as the original does.
    fresh = answer(new, "--mode", "bm25")
    assert not fresh["cached"] and fresh == answer(env, "--mode", "bm25")
    assert "the chain verifies" in ok(foundry(new, "audit", "verify"))


def test_restore_refuses_a_home_that_holds_data_and_changes_nothing(
    backed_up: tuple[dict[str, str], Path, dict],
) -> None:
    env, root, _ = backed_up
    db = root / "home" / "foundry.sqlite3"
    rows = tables(db)
    done = foundry(env, "restore", str(root / "kb.tar"))
    assert done.returncode != 0 and "already holds data" in done.stderr and "--force" in done.stderr
    assert tables(db) == rows


def test_backup_never_overwrites_a_file(backed_up: tuple[dict[str, str], Path, dict]) -> None:
    env, root, _ = backed_up
    size = (root / "kb.tar").stat().st_size
    done = foundry(env, "backup", str(root / "kb.tar"))
    assert done.returncode != 0 and "already exists" in done.stderr and (root / "kb.tar").stat().st_size == size


def _tampered(root: Path, name: str, change: str) -> Path:
    """A copy of the backup with one member rewritten (``change``: a damaged database, or a foreign one)."""
    work = root / f"tamper-{name}"
    with tarfile.open(root / "kb.tar") as tar:
        tar.extractall(work, filter="data")
    db = work / "foundry.sqlite3"
    if change == "damaged":
        data = bytearray(db.read_bytes())
        data[len(data) // 2 : len(data) // 2 + 4096] = b"\xff" * 4096
        db.write_bytes(bytes(data))
        manifest = json.loads((work / "manifest.json").read_text())
        import hashlib

        manifest["members"]["foundry.sqlite3"] = hashlib.sha256(db.read_bytes()).hexdigest()
        (work / "manifest.json").write_text(json.dumps(manifest))
    else:
        (work / "manifest.json").unlink()
    out = root / f"{name}.tar"
    with tarfile.open(out, "w") as tar:
        for member in sorted(work.rglob("*")):
            if member.is_file():
                tar.add(member, arcname=member.relative_to(work).as_posix())
    return out


@pytest.mark.parametrize(
    "change, says",
    [("damaged", "integrity_check"), ("foreign", "not a Foundry backup")],
)
def test_a_bad_backup_is_refused_and_leaves_no_database(
    backed_up: tuple[dict[str, str], Path, dict], change: str, says: str
) -> None:
    _, root, _ = backed_up
    archive = _tampered(root, change, change)
    new = foundry_env(root / f"into-{change}")
    done = foundry(new, "restore", str(archive))
    assert done.returncode != 0 and says in done.stderr, done.stderr
    left = sorted(p.name for p in (root / f"into-{change}").iterdir())
    assert "foundry.sqlite3" not in left and not [n for n in left if n.startswith(".foundry-restore-")]
