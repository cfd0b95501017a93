"""Database faults with real processes: write contention, a full disk, a SIGKILL mid-transaction.

Each test runs ``foundry`` in subprocesses against its own SQLite file. Afterwards
``foundry check`` must tell the truth (chunk, FTS and vector rows agree, PRAGMA
integrity_check ok), the error the user saw must name the problem and the fix,
and running the ingest again must repair everything.
"""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pysqlite3
import pytest

REPO = Path(__file__).resolve().parents[2]
CLI = "from foundry_site.cli import main; main()"


def foundry_env(home: Path, db: Path) -> dict[str, str]:
    home.mkdir(parents=True, exist_ok=True)
    config = home / "foundry.yaml"
    config.write_text("ingest:\n  summary_model: none\nembedding:\n  context_model: none\n")
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "foundry_site.settings",
        "PYTHONPATH": str(REPO),
        "FOUNDRY_HOME": str(home),
        "FOUNDRY_DB": str(db),
        "FOUNDRY_CONFIG": str(config),
    }
    env.pop("FOUNDRY_BROKER_URL", None)  # in-process ingest: the fault hits the process we watch
    return env


def foundry(env: dict[str, str], *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", CLI, *args], env=env, cwd=REPO, capture_output=True, text=True, timeout=timeout
    )


def migrate(env: dict[str, str]) -> None:
    done = subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput"],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr


def check_ok(env: dict[str, str]) -> str:
    done = foundry(env, "check")
    assert done.returncode == 0 and "PRAGMA integrity_check: ok" in done.stdout and done.stdout.endswith("OK\n"), (
        done.stdout,
        done.stderr,
    )
    return done.stdout


def exported(env: dict[str, str], home: Path) -> dict[str, list[str]]:
    """Chunk texts per path, through ``foundry export``."""
    out = home / "documents.csv"
    done = foundry(env, "export", str(out))
    assert done.returncode == 0, done.stderr
    texts: dict[str, list[str]] = {}
    for row in csv.DictReader(out.open(encoding="utf-8")):
        texts.setdefault(row["path"], []).append(row["chunk_text"])
    return texts


def write_notes(kb: Path, count: int, *, words: int = 40, tag: str = "v1") -> None:
    kb.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        body = " ".join(f"Note {i} {tag}: pump P{i} runs at {1000 + j} rpm." for j in range(words))
        (kb / f"note{i:02d}.txt").write_text(body + "\n")


def ingest_stalled_in_transaction(env: dict[str, str], kb: Path, marker: Path) -> subprocess.Popen[str]:
    """``foundry ingest kb`` stopped inside the transaction that stores its first file: after the
    chunks, FTS rows and vectors are written, before the commit. Returns once it is there."""
    driver = (
        "import sys, time, django\n"
        "django.setup()\n"
        "from sources import vectorstore\n"
        "real = vectorstore.vectors_insert\n"
        "def stall(model, rows):\n"
        "    real(model, rows)\n"
        f"    open({str(marker)!r}, 'w').close()\n"
        "    time.sleep(600)\n"
        "vectorstore.vectors_insert = stall\n"
        "sys.argv = ['foundry', 'ingest', sys.argv[1]]\n"
        f"{CLI}\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", driver, str(kb)],
        env=env,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 600
    while not marker.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"the ingest never reached the transaction: {proc.communicate()[1]}")
        time.sleep(0.2)
    return proc


def test_sigkill_mid_transaction_leaves_a_consistent_index_and_rerun_repairs(tmp_path: Path) -> None:
    env = foundry_env(tmp_path / "home", tmp_path / "kb.sqlite3")
    migrate(env)
    kb = tmp_path / "kb"
    write_notes(kb, 3)
    assert foundry(env, "ingest", str(kb)).returncode == 0
    (kb / "note01.txt").write_text("Note 1 v2: pump P1 was replaced by pump P9.\n")
    (kb / "note05.txt").write_text("Note 5: a new file about valve V5.\n")

    # Stopped inside the transaction that stores a file, then SIGKILLed.
    proc = ingest_stalled_in_transaction(env, kb, tmp_path / "inside-transaction")
    try:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL

    check_ok(env)
    texts = exported(env, tmp_path / "home")
    assert texts["note01.txt"][0].startswith("Note 1 v1")  # the old version, whole
    assert set(texts) == {"note00.txt", "note01.txt", "note02.txt"}  # nothing half-written from the killed run

    rerun = foundry(env, "ingest", str(kb))
    assert rerun.returncode == 0, rerun.stderr
    check_ok(env)
    texts = exported(env, tmp_path / "home")
    assert texts["note01.txt"] == ["Note 1 v2: pump P1 was replaced by pump P9."]
    assert texts["note05.txt"] == ["Note 5: a new file about valve V5."]


def test_sigterm_mid_ingest_fails_the_job_with_a_reason_and_retry_does_the_rest(tmp_path: Path) -> None:
    env = foundry_env(tmp_path / "home", tmp_path / "kb.sqlite3")
    migrate(env)
    kb = tmp_path / "kb"
    write_notes(kb, 3)
    proc = ingest_stalled_in_transaction(env, kb, tmp_path / "inside-transaction")
    try:
        os.kill(proc.pid, signal.SIGTERM)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130 and "Interrupted. Files already stored stay" in stderr, stderr
    check_ok(env)
    assert exported(env, tmp_path / "home") == {}  # the file being stored was rolled back whole

    listed = json.loads(foundry(env, "jobs", "--json").stdout)
    assert [(j["status"], j["reason"].startswith("interrupted (Ctrl-C or SIGTERM)")) for j in listed] == [
        ("failed", True)
    ]
    retried = foundry(env, "jobs", "retry", str(listed[0]["id"]))
    assert retried.returncode == 0, retried.stderr
    check_ok(env)
    assert set(exported(env, tmp_path / "home")) == {"note00.txt", "note01.txt", "note02.txt"}


LOCK_HOLDER = """
import os, sys, time, pysqlite3
db, rounds, hold, release = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
conn = pysqlite3.connect(db, timeout=60, isolation_level=None)
for i in range(rounds):
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("INSERT INTO sources_collection(name, description, public, created_at, folder, sync_error) "
                 "VALUES (?, '', 0, datetime('now'), '', '')", [f"held-{i}"])
    print("holding", i, flush=True)
    until = time.monotonic() + hold
    while time.monotonic() < until and not os.path.exists(release):
        time.sleep(0.1)
    conn.execute("COMMIT")
    time.sleep(0.3)
print("done", flush=True)
"""


def hold_locks(db: Path, rounds: int, hold: float, release: Path | None = None) -> subprocess.Popen[str]:
    """Another process that takes the write lock ``rounds`` times for ``hold`` s (or until ``release`` exists)."""
    release = release or db.with_name("never-released")
    return subprocess.Popen(
        [sys.executable, "-c", LOCK_HOLDER, str(db), str(rounds), str(hold), str(release)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_write_contention_waits_for_the_lock_instead_of_failing(tmp_path: Path) -> None:
    """Another process keeps taking the write lock for seconds at a time while an ingest writes."""
    db = tmp_path / "kb.sqlite3"
    env = foundry_env(tmp_path / "home", db)
    migrate(env)
    kb = tmp_path / "kb"
    write_notes(kb, 12)
    holder = hold_locks(db, rounds=8, hold=3.0)
    assert holder.stdout.readline().startswith("holding 0")
    ingest = subprocess.Popen(
        [sys.executable, "-c", CLI, "ingest", str(kb), "--json"],
        env=env,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    status = foundry(env, "status")  # a third process reading while both write
    out, err = ingest.communicate(timeout=900)
    held_out, held_err = holder.communicate(timeout=120)
    assert status.returncode == 0, status.stderr
    assert ingest.returncode == 0 and "locked" not in err, err
    assert holder.returncode == 0 and held_out.rstrip().endswith("done"), held_err
    assert '"ingested": 12' in out and '"failed": 0' in out
    check_ok(env)
    names = {row[0] for row in pysqlite3.connect(db).execute("SELECT name FROM sources_collection")}
    assert {f"held-{i}" for i in range(8)} <= names


def test_lock_held_past_the_busy_timeout_names_the_problem_then_rerun_repairs(tmp_path: Path) -> None:
    db = tmp_path / "kb.sqlite3"
    env = foundry_env(tmp_path / "home", db)
    migrate(env)
    kb = tmp_path / "kb"
    write_notes(kb, 2)
    release = tmp_path / "release"
    holder = hold_locks(db, rounds=1, hold=600.0, release=release)  # until the ingest has given up (30 s timeout)
    assert holder.stdout.readline().startswith("holding 0")
    done = foundry(env, "ingest", str(kb))
    release.touch()
    holder.communicate(timeout=120)
    assert done.returncode == 1
    message = " ".join(done.stderr.split())
    assert "stayed locked by another process for more than 30 s" in message, done.stderr
    assert "Run the command again" in message and "Traceback" not in done.stderr
    check_ok(env)
    rerun = foundry(env, "ingest", str(kb))
    assert rerun.returncode == 0, rerun.stderr
    check_ok(env)
    assert set(exported(env, tmp_path / "home")) == {"note00.txt", "note01.txt"}


@pytest.fixture
def small_disk(tmp_path: Path) -> Path:
    """A real, small filesystem (tmpfs) for the database; needs root (CAP_SYS_ADMIN), else the test is skipped."""
    mount = tmp_path / "small-disk"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)], capture_output=True, text=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_disk_full_during_ingest_names_it_keeps_the_index_and_rerun_repairs(tmp_path: Path, small_disk: Path) -> None:
    db = small_disk / "kb.sqlite3"
    env = foundry_env(tmp_path / "home", db)
    migrate(env)
    kb = tmp_path / "kb"
    write_notes(kb, 2, words=5)
    assert foundry(env, "ingest", str(kb)).returncode == 0
    before = exported(env, tmp_path / "home")
    write_notes(kb, 2, words=5, tag="v2")  # changes the stored files: their old versions must survive
    used = os.statvfs(small_disk)
    used_bytes = (used.f_blocks - used.f_bfree) * used.f_frsize
    # Leave ~600 KB: the notes fit, the two manuals (~140 chunks each, ~4 KB a chunk with FTS and vector) do not.
    subprocess.run(["mount", "-o", f"remount,size={used_bytes + 600 * 1024}", str(small_disk)], check=True)
    for i in range(2, 4):
        (kb / f"big{i}.txt").write_text(" ".join(f"Manual {i} line {j}: torque T{j} is {j} Nm." for j in range(2000)))
    done = foundry(env, "ingest", str(kb))
    assert done.returncode == 1, (done.stdout, done.stderr)
    message = " ".join(done.stderr.split())
    assert "Disk full" in message and "Free some space" in message and "Traceback" not in done.stderr, done.stderr

    check_ok(env)
    after = exported(env, tmp_path / "home")
    for path in before:  # every stored file is whole: all its chunks from one version
        tags = {"v2" if " v2:" in chunk else "v1" for chunk in after[path]}
        assert len(tags) == 1, (path, tags)

    subprocess.run(["mount", "-o", "remount,size=256m", str(small_disk)], check=True)
    rerun = foundry(env, "ingest", str(kb), "--json")
    assert rerun.returncode == 0 and '"failed": 0' in rerun.stdout, rerun.stderr
    check_ok(env)
    texts = exported(env, tmp_path / "home")
    assert set(texts) == {"note00.txt", "note01.txt", "big2.txt", "big3.txt"}
    assert all("v2" in texts[f"note{i:02d}.txt"][0] for i in range(2))


def test_a_home_never_migrated_is_set_up_by_the_first_command(tmp_path: Path) -> None:
    env = foundry_env(tmp_path / "home", tmp_path / "home" / "foundry.sqlite3")
    done = foundry(env, "status")
    assert (
        done.returncode == 0 and "Created a new knowledge base at" in done.stderr and "Traceback" not in done.stderr
    ), done.stderr


def test_a_home_one_migration_behind_names_it_before_any_command_runs(tmp_path: Path) -> None:
    env = foundry_env(tmp_path / "home", tmp_path / "home" / "foundry.sqlite3")
    migrate(env)
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "sources", "0004"], env=env, cwd=REPO, check=True, capture_output=True
    )
    for command in ("status", "check"):  # `check` too: it said OK while every ingest failed on the missing column
        done = foundry(env, command)
        assert (
            done.returncode == 1
            and "migration(s) this version brings (sources.0005_source_cited_name" in done.stderr
            and "run `.venv/bin/python manage.py migrate`" in done.stderr
        ), done.stderr
    assert foundry(env, "ingest", str(tmp_path), "--collection", "new").returncode == 1
    migrate(env)
    assert foundry(env, "collections", "list").stdout.count("new") == 0  # the refused ingest left nothing behind


def django_run(env: dict[str, str], code: str) -> str:
    """Run ``code`` in a process set up like ``foundry``'s (same settings, same database); returns its stdout."""
    done = subprocess.run(
        [sys.executable, "-c", "import django\ndjango.setup()\n" + code],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


DAMAGE = """
import json
from django.conf import settings
from django.db import connection, transaction
from sources import vectorstore
model = settings.FOUNDRY.embedding.model
table = vectorstore.table_name(model)
first, second = sorted(vectorstore.chunk_ids())[:2]
with connection.cursor() as cur:
    cur.execute(f"SELECT embedding FROM {table} WHERE chunk_id = %s", [second])
    kept = bytes(cur.fetchone()[0]).hex()
with transaction.atomic(), connection.cursor() as cur:
    cur.execute("DELETE FROM chunks_fts WHERE rowid = %s", [first])
    cur.execute("INSERT INTO chunks_fts(rowid, text, heading, title, stems) VALUES (999999, 'orphan', '', '', '')")
    vectorstore.orphans_delete(table, [second])
    vectorstore.vectors_insert(model, [(888888, 1, [0.5] * vectorstore.table_dimension(model))])
print(json.dumps({"chunk": second, "vector": kept}))
"""

VECTOR_OF = """
from django.conf import settings
from django.db import connection
from sources import vectorstore
with connection.cursor() as cur:
    cur.execute(f"SELECT embedding FROM {vectorstore.table_name(settings.FOUNDRY.embedding.model)} WHERE chunk_id = %s",
                [int({chunk})])
    print(bytes(cur.fetchone()[0]).hex())
"""


def test_check_repair_rebuilds_the_keyword_index_and_the_vectors_from_the_chunks(tmp_path: Path) -> None:
    env = foundry_env(tmp_path / "home", tmp_path / "kb.sqlite3")
    migrate(env)
    kb = tmp_path / "kb"
    write_notes(kb, 3)
    assert foundry(env, "ingest", str(kb)).returncode == 0
    before = exported(env, tmp_path / "home")
    damaged = json.loads(django_run(env, DAMAGE))

    found = foundry(env, "check")
    assert found.returncode == 1, found.stdout
    assert "PROBLEM: 1 chunk(s) missing from FTS" in found.stdout and "PROBLEM: 1 orphan row(s) in FTS" in found.stdout
    assert "1 chunk(s) missing from vec_chunks_" in found.stdout and "`foundry check --repair`" in found.stdout

    repaired = foundry(env, "check", "--repair")
    assert repaired.returncode == 0 and repaired.stdout.endswith("OK\n"), (repaired.stdout, repaired.stderr)
    assert "1 chunk(s) embedded again" in repaired.stdout and "orphan vectors deleted: 1 in vec_chunks_" in (
        repaired.stdout
    )
    check_ok(env)
    assert exported(env, tmp_path / "home") == before  # the chunks are the record: unchanged
    again = django_run(env, VECTOR_OF.replace("{chunk}", str(damaged["chunk"]))).strip()
    import numpy as np

    old, new = (np.frombuffer(bytes.fromhex(h), dtype=np.float32) for h in (damaged["vector"], again))
    assert float(old @ new / (np.linalg.norm(old) * np.linalg.norm(new))) > 0.999  # the same text, the same model
    assert foundry(env, "check", "--repair").returncode == 0  # a second repair finds nothing to do


PAGE_LIMIT = """
import sys
from django.db.backends.signals import connection_created

SPARE = int(sys.argv[2])  # pages the database may still grow by

def limit(sender, connection, **kwargs):
    with connection.cursor() as cur:
        cur.execute("PRAGMA page_count")
        pages = cur.fetchone()[0]
        cur.execute(f"PRAGMA max_page_count = {pages + SPARE}")

connection_created.connect(limit)
sys.argv = ['foundry', 'ingest', sys.argv[1]]
from foundry_site.cli import main
main()
"""


def test_database_full_at_its_page_limit_names_it_keeps_the_index_and_rerun_repairs(tmp_path: Path) -> None:
    """A full disk without root: SQLite's page limit gives the same SQLITE_FULL a full filesystem does."""
    env = foundry_env(tmp_path / "home", tmp_path / "kb.sqlite3")
    migrate(env)
    kb = tmp_path / "kb"
    write_notes(kb, 2, words=5)
    assert foundry(env, "ingest", str(kb)).returncode == 0
    before = exported(env, tmp_path / "home")
    write_notes(kb, 2, words=5, tag="v2")
    for i in range(2, 4):
        (kb / f"big{i}.txt").write_text(" ".join(f"Manual {i} line {j}: torque T{j} is {j} Nm." for j in range(2000)))
    full = subprocess.run(
        [sys.executable, "-c", "import django\ndjango.setup()\n" + PAGE_LIMIT, str(kb), "40"],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert full.returncode == 1, (full.stdout, full.stderr)
    message = " ".join(full.stderr.split())
    assert "Disk full" in message and "Free some space" in message and "Traceback" not in full.stderr, full.stderr
    check_ok(env)
    after = exported(env, tmp_path / "home")
    for path in before:  # every stored file is whole: all its chunks from one version
        assert len({"v2" if " v2:" in chunk else "v1" for chunk in after[path]}) == 1, path
    assert set(after) <= {"note00.txt", "note01.txt", "big2.txt", "big3.txt"}

    rerun = foundry(env, "ingest", str(kb), "--json")
    assert rerun.returncode == 0 and '"failed": 0' in rerun.stdout, rerun.stderr
    check_ok(env)
    texts = exported(env, tmp_path / "home")
    assert set(texts) == {"note00.txt", "note01.txt", "big2.txt", "big3.txt"}
    assert all("v2" in texts[f"note{i:02d}.txt"][0] for i in range(2))


READ_ONLY = """
import sys
from django.db.backends.signals import connection_created

def read_only(sender, connection, **kwargs):
    with connection.cursor() as cur:
        cur.execute("PRAGMA query_only = ON")

connection_created.connect(read_only)
sys.argv = ['foundry', 'ingest', sys.argv[1]]
from foundry_site.cli import main
main()
"""


def test_a_read_only_database_file_names_it_and_writes_nothing(tmp_path: Path) -> None:
    """Mode 0444; root writes whatever the mode says, so as root every connection is made read-only
    instead (``PRAGMA query_only``), which refuses writes with the same SQLITE_READONLY."""
    db = tmp_path / "kb.sqlite3"
    env = foundry_env(tmp_path / "home", db)
    migrate(env)
    kb = tmp_path / "kb"
    write_notes(kb, 2)
    assert foundry(env, "ingest", str(kb)).returncode == 0
    before = exported(env, tmp_path / "home")
    write_notes(kb, 3, tag="v2")
    os.chmod(db, 0o444)
    try:
        if os.geteuid() == 0:
            argv = [sys.executable, "-c", "import django\ndjango.setup()\n" + READ_ONLY, str(kb)]
        else:
            argv = [sys.executable, "-c", CLI, "ingest", str(kb)]
        done = subprocess.run(argv, env=env, cwd=REPO, capture_output=True, text=True, timeout=600)
    finally:
        os.chmod(db, 0o644)
    assert done.returncode == 1, (done.stdout, done.stderr)
    message = " ".join(done.stderr.split())
    assert "is read-only" in message and str(db) in message and "Traceback" not in done.stderr, done.stderr
    check_ok(env)
    assert exported(env, tmp_path / "home") == before
    rerun = foundry(env, "ingest", str(kb), "--json")
    assert rerun.returncode == 0 and '"failed": 0' in rerun.stdout, rerun.stderr
    assert all("v2" in chunks[0] for chunks in exported(env, tmp_path / "home").values())
