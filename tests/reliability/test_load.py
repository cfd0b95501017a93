"""Load: 10 and then 50 concurrent API users against a production-style server while an ingest runs.

A real `foundry serve` (gunicorn, its own FOUNDRY_HOME and SQLite file, real local
models) answers ``POST /api/v1/query`` from ``bench/api_load.py``'s users (answerable,
gate-refused and repeated questions) for a bounded time, while `foundry ingest` writes
a second collection from another process. Correctness only: no 5xx and no failed
connections, every answer has its QueryLog row (ids and counts), no "database is locked",
no worker timeout, no traceback in the logs, and the index passes `foundry check`.
Latency and throughput are printed (run with ``-s``), never asserted: the machine is shared.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from django.conf import settings

from bench.api_load import LoadResult, run_load

pytestmark = pytest.mark.integration

USERS = (10, 50)
DURATION_S = float(os.environ.get("FOUNDRY_LOAD_SECONDS", "20"))
LOG_PROBLEMS = ("database is locked", "WORKER TIMEOUT", "Traceback", "OperationalError")

SETUP = """
import json, sys
import django
django.setup()
from django.core.management import call_command
from django.contrib.auth.models import User
from foundry_site.services.tokens import token_create
from sources.services.collections import collection_create, collection_grant
from sources.services.ingest_jobs import knowledge_base_ingest

call_command("migrate", verbosity=0, interactive=False)
collection_create(name="docs")
report = knowledge_base_ingest(target=sys.argv[1], collection="docs")
tokens = []
for i in range(int(sys.argv[2])):
    User.objects.create_user(f"load{i}")
    collection_grant(collection="docs", username=f"load{i}")
    tokens.append(token_create(username=f"load{i}", name="load test").plain)
print(json.dumps(tokens))
"""


@dataclass
class Server:
    url: str
    home: Path
    env: dict[str, str]
    ingest_env: dict[str, str]
    tokens: list[str]
    log: Path

    def ingest(self, *args: str, log: Path) -> subprocess.Popen:
        return subprocess.Popen(
            foundry_argv("ingest", *args),
            env=self.ingest_env,
            cwd=settings.BASE_DIR,
            stdout=log.open("w"),
            stderr=subprocess.STDOUT,
        )

    def query_log_ids(self) -> set[int]:
        with sqlite3.connect(f"file:{self.home / 'foundry.sqlite3'}?mode=ro", uri=True, timeout=60) as db:
            return {row[0] for row in db.execute("SELECT id FROM retrieval_querylog")}


def foundry_argv(*args: str) -> list[str]:
    """The `foundry` command line, run by this interpreter from the checkout under test."""
    return [sys.executable, str(settings.BASE_DIR / "manage.py"), "foundry", *args]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_env(home: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("FOUNDRY_", "CELERY_")) and k != "DJANGO_SETTINGS_MODULE"
    }
    env.update(
        FOUNDRY_HOME=str(home),
        DJANGO_SETTINGS_MODULE="foundry_site.settings",
        PYTHONPATH=os.pathsep.join(filter(None, [str(settings.BASE_DIR), os.environ.get("PYTHONPATH")])),
        # The per-user limit (10 a minute) would turn most of this load into 429s; this measures capacity.
        FOUNDRY_QUERY_RATE="0",
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        HF_HUB_OFFLINE="1",
        TOKENIZERS_PARALLELISM="false",
    )
    return env


def ingest_env(env: dict[str, str], home: Path) -> dict[str, str]:
    """The server's environment for ingest processes, without source summaries.

    A summary is one local-model call per file: on two shared cores it would make each
    ingest take minutes. The server keeps the shipped configuration (its answers use it).
    """
    config = yaml.safe_load(Path(settings.FOUNDRY_CONFIG_PATH).read_text()) or {}
    config.setdefault("ingest", {})["summary_model"] = "none"
    path = home / "ingest.yaml"
    path.write_text(yaml.safe_dump(config))
    return {**env, "FOUNDRY_CONFIG": str(path)}


def wait_until_up(url: str, proc: subprocess.Popen, *, timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, "foundry serve exited during start-up"
        try:
            urllib.request.urlopen(f"{url}/api/v1/runs", timeout=5)
        except urllib.error.HTTPError as exc:
            if exc.code == 401:  # up, and asking for a token
                return
        except OSError:
            pass
        time.sleep(1)
    raise AssertionError(f"foundry serve did not answer within {timeout:.0f} s")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    home = tmp_path_factory.mktemp("load-home")
    env = server_env(home)
    done = subprocess.run(
        [sys.executable, "-c", SETUP, str(settings.BASE_DIR / "knowledge_base"), str(max(USERS))],
        env=ingest_env(env, home),
        cwd=settings.BASE_DIR,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    tokens = json.loads(done.stdout.strip().splitlines()[-1])
    port = free_port()
    log = home / "serve.log"
    with log.open("w") as out:
        # Its own session, so the teardown stops gunicorn's master and workers and nothing else.
        proc = subprocess.Popen(
            foundry_argv("serve", "--port", str(port)),
            env=env,
            cwd=settings.BASE_DIR,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until_up(url, proc)
        # Each gunicorn worker loads the models on its first question; keep that out of the numbers.
        run_load(url, tokens, users=4, per_user=1)
        yield Server(url, home, env, ingest_env(env, home), tokens, log)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)


def write_corpus(folder: Path, *, files: int = 4, sections: int = 30) -> None:
    """Generated manuals for the concurrent ingest: about files × sections chunks."""
    folder.mkdir()
    for f in range(files):
        parts = [f"# Pump station {f} manual\n"]
        for s in range(sections):
            parts.append(
                f"## Pump P{f}-{s}\n\nPump P{f}-{s} delivers {10 + s} l/min at {2 + s % 5} bar. "
                f"Its motor draws {1 + s % 7}.{s % 10} A at 230 V AC and must be serviced every "
                f"{6 + s % 12} months. The inlet filter of station {f} is cleaned weekly; the outlet "
                f"valve closes within {s % 4 + 1} seconds after a stop command. "
                "Check the seal, the bearings and the coupling at every service visit.\n"
            )
        (folder / f"station-{f}.md").write_text("\n".join(parts))


def problems_in_logs(server: Server) -> list[str]:
    found = []
    for path in (server.log, server.home / "foundry.log"):
        text = path.read_text(errors="replace") if path.exists() else ""
        found += [f"{path.name}: {p}" for p in LOG_PROBLEMS if p in text]
    return found


@pytest.mark.parametrize("users", USERS)
def test_concurrent_users_while_an_ingest_runs(server: Server, users: int, tmp_path: Path) -> None:
    corpus = tmp_path / "incoming"
    write_corpus(corpus)
    before = server.query_log_ids()
    ingest = server.ingest(str(corpus), "--collection", f"incoming{users}", "--json", log=tmp_path / "ingest.log")
    result = run_load(server.url, server.tokens[:users], users=users, duration=DURATION_S)
    ingest_overlapped = ingest.poll() is None
    assert ingest.wait(timeout=1800) == 0, (tmp_path / "ingest.log").read_text()[-3000:]
    report(result, ingest_overlapped)

    failed = [o for o in result.outcomes if o.status >= 500 or o.status == 0]
    assert failed == [], failed[:5]
    assert {o.status for o in result.outcomes} == {200}
    answered = [o.query_id for o in result.outcomes]
    created = server.query_log_ids() - before
    assert len(set(answered)) == len(answered) and set(answered) == created  # no lost and no extra rows
    assert problems_in_logs(server) == []
    check = subprocess.run(
        foundry_argv("check"), env=server.env, cwd=settings.BASE_DIR, capture_output=True, text=True, timeout=600
    )
    assert check.returncode == 0, check.stdout + check.stderr


def report(result: LoadResult, ingest_overlapped: bool) -> None:
    summary = result.summary()
    summary["ingest_still_running_at_end"] = ingest_overlapped
    summary["loadavg"] = [round(v, 2) for v in os.getloadavg()]
    print(f"\nLOAD {json.dumps(summary)}")
