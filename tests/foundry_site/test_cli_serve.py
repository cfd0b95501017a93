"""``foundry serve`` and ``foundry worker`` command lines (built, not executed)."""

from __future__ import annotations

import argparse
import sys
import subprocess

import pytest
from django.conf import settings

from foundry_site.cli.serve import serve_argv, worker_argv


def worker_opts(queues: str, *, no_beat: bool = False) -> argparse.Namespace:
    return argparse.Namespace(queues=queues, concurrency=2, name=None, no_beat=no_beat, loglevel="INFO")


def test_compute_worker_never_gets_the_database() -> None:
    argv, env = worker_argv(worker_opts("compute"))
    assert argv[1:6] == ["-m", "celery", "-A", "foundry_site", "worker"]
    assert argv[argv.index("-Q") + 1] == "compute" and "--beat" not in argv
    assert env["FOUNDRY_COMPUTE_ONLY"] == "1"


def test_db_worker_runs_the_sweeper_schedule() -> None:
    argv, env = worker_argv(worker_opts("compute,db"))
    assert argv[argv.index("-Q") + 1] == "compute,db" and "--beat" in argv
    assert "FOUNDRY_COMPUTE_ONLY" not in env or env["FOUNDRY_COMPUTE_ONLY"] != "1"
    assert "--beat" not in worker_argv(worker_opts("db", no_beat=True))[0]


def test_unknown_queue_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown queue"):
        worker_argv(worker_opts("gpu"))


def test_serve_runs_gunicorn_on_wsgi() -> None:
    argv = serve_argv(argparse.Namespace(host="0.0.0.0", port=9000, workers=3, threads=4, timeout=60))
    assert argv[1:4] == ["-m", "gunicorn", "foundry_site.wsgi:application"]
    assert argv[argv.index("--bind") + 1] == "0.0.0.0:9000" and argv[argv.index("--workers") + 1] == "3"


def test_serve_uses_threaded_workers_so_long_answers_are_not_killed() -> None:
    """A sync worker busy with one slow answer misses its heartbeat and is SIGKILLed (test_load.py)."""
    argv = serve_argv(argparse.Namespace(host="127.0.0.1", port=8000, workers=2, threads=4, timeout=120))
    assert argv[argv.index("--worker-class") + 1] == "gthread" and argv[argv.index("--threads") + 1] == "4"


def test_serve_preloads_every_page_before_the_workers_fork() -> None:
    """gunicorn imports ``foundry_site.wsgi`` once in its master; that import brings in every page and API,
    so no worker, not even one started after a crash, imports them on its first request."""
    argv = serve_argv(argparse.Namespace(host="127.0.0.1", port=8000, workers=2, threads=4, timeout=120))
    assert "--preload" in argv
    probe = "import sys, foundry_site.wsgi; print(sorted({'generation.views', 'foundry_site.api'} - set(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=settings.BASE_DIR)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
