"""``foundry serve`` and ``foundry worker`` command lines (built, not executed)."""

from __future__ import annotations

import argparse
import io
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

from foundry_site.cli.serve import control_socket_args, serve_argv, serve_command, worker_argv
from tests.reliability.test_load import foundry_argv, free_port, server_env, wait_until_up


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


def test_serve_keeps_its_control_socket_in_foundry_home(tmp_path: Path) -> None:
    argv = serve_argv(argparse.Namespace(host="127.0.0.1", port=8000, workers=1, threads=4, timeout=120))
    assert argv[argv.index("--control-socket") + 1] == str(settings.FOUNDRY_HOME / "gunicorn.ctl")
    assert control_socket_args(tmp_path / ("x" * 120)) == ["--no-control-socket"]


def test_serve_says_one_worker_in_the_singular(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "execv", lambda *a: None)
    out = io.StringIO()
    serve_command(argparse.Namespace(host="127.0.0.1", port=8000, workers=1, threads=4, timeout=120), out)
    assert "with 1 gunicorn worker\n" in out.getvalue()
    out = io.StringIO()
    serve_command(argparse.Namespace(host="127.0.0.1", port=8000, workers=3, threads=4, timeout=120), out)
    assert "with 3 gunicorn workers\n" in out.getvalue()


@pytest.mark.integration
def test_two_servers_on_two_homes_keep_their_own_control_sockets(tmp_path: Path) -> None:
    """Before, both used ~/.gunicorn/gunicorn.ctl: the second took it over, and stopping it deleted the socket."""
    procs = []
    try:
        for name in ("one", "two"):
            home = tmp_path / name
            home.mkdir()
            port = free_port()
            log = (home / "serve.log").open("w")
            proc = subprocess.Popen(
                foundry_argv("serve", "--port", str(port), "--workers", "1"),
                env=server_env(home),
                cwd=settings.BASE_DIR,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
            procs.append(proc)
            wait_until_up(f"http://127.0.0.1:{port}", proc)
            assert (home / "gunicorn.ctl").is_socket()
        procs[1].send_signal(signal.SIGTERM)
        procs[1].wait(timeout=60)
        assert (tmp_path / "one" / "gunicorn.ctl").is_socket() and not (tmp_path / "two" / "gunicorn.ctl").exists()
        assert "with 1 gunicorn worker\n" in (tmp_path / "one" / "serve.log").read_text()
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=60)
