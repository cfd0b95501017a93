"""Helpers for tests that run real Celery workers (subprocesses) against a real Redis.

Used by tests/sources/test_tasks_broker.py and tests/generation/test_generate_broker.py.
Needs Redis at 127.0.0.1:6379 (or FOUNDRY_TEST_REDIS_URL); uses database 14, flushed
before and after. ``redis_or_skip`` skips with a message when Redis is unreachable,
except in CI (CI=true), where it fails.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from foundry_site.celery import app as celery_app

# A dedicated database number: the tests flush it before and after.
REDIS_URL = os.environ.get("FOUNDRY_TEST_REDIS_URL", "redis://127.0.0.1:6379/14")
# `python -m celery`, minus any editable-install import hook: a shared development
# virtualenv may hold an editable install of another checkout, whose hook would
# fill in modules this checkout lacks (Celery autodiscovers `<app>.tasks`).
WORKER_BOOT = (
    "import sys; sys.meta_path[:] = [f for f in sys.meta_path if 'Editable' not in repr(f)]; "
    "from celery.__main__ import main; sys.argv[0] = 'celery'; sys.exit(main())"
)
WORKER_APP = "tests.broker_worker_app"
REPO = Path(settings.BASE_DIR)


def redis_or_skip() -> None:
    import redis

    try:
        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2).ping()
    except redis.exceptions.RedisError as exc:
        message = f"no Redis reachable at {REDIS_URL} ({exc}); broker integration tests need it"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)


def redis_flush() -> None:
    import redis

    redis.Redis.from_url(REDIS_URL).flushdb()


class Worker:
    """One ``celery worker`` subprocess on one queue, in its own process group so it can be killed whole.

    A ``compute`` worker runs with FOUNDRY_COMPUTE_ONLY=1: it has no database at all.
    A ``db`` worker also runs celery beat (the stale-run sweeper).
    """

    def __init__(self, queue: str, env: dict[str, str], home: Path, *, name: str = "") -> None:
        self.queue, self.env, self.home = queue, env, home
        self.name = name or queue
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = home / f"worker-{self.name}.log"
        self.offset = 0

    def start(self) -> None:
        """Start the process; ``wait_ready`` blocks until it consumes."""
        argv = [
            sys.executable,
            "-c",
            WORKER_BOOT,
            "-A",
            WORKER_APP,
            "worker",
            "-Q",
            self.queue,
            "-n",
            f"{self.name}-test@%h",
            "-c",
            "1",
            "--loglevel",
            "INFO",
            "--without-mingle",
            "--without-gossip",
        ]
        env = dict(self.env)
        if self.queue == "db":
            argv += ["--beat", "--schedule", str(self.home / f"beat-schedule-{self.name}")]
        else:
            env["FOUNDRY_COMPUTE_ONLY"] = "1"
        self.offset = self.log.stat().st_size if self.log.exists() else 0
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                argv, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )

    def wait_ready(self, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc and self.proc.poll() is None, f"{self.name} worker exited:\n{self.tail()}"
            if b" ready." in self.log.read_bytes()[self.offset :]:
                return
            time.sleep(0.2)
        raise AssertionError(f"{self.name} worker not ready after {timeout}s:\n{self.tail()}")

    def kill(self) -> None:
        """SIGKILL the worker and its pool children, as a crashed machine would."""
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        """Warm shutdown (the main process lets the running task finish), then SIGKILL if it hangs."""
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()

    def since_start(self) -> str:
        """The log written since the last start."""
        return self.log.read_bytes()[self.offset :].decode(errors="replace") if self.log.exists() else ""

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:] if self.log.exists() else "(no log)"


def worker_env(home: Path, *, config: str, **extra: str) -> dict[str, str]:
    """The environment of a test worker: this checkout, the test database, the test broker, ``config`` as foundry.yaml.

    Call it after ``django_db_setup``: the test database's name is read from the connection.
    """
    db_name = str(connection.settings_dict["NAME"])
    path = home / "foundry.yaml"
    path.write_text(config)
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "foundry_site.settings",
        "PYTHONPATH": str(REPO),
        "FOUNDRY_HOME": str(home),
        "FOUNDRY_DB": db_name,
        "FOUNDRY_TEST_DB": db_name,
        "FOUNDRY_BROKER_URL": REDIS_URL,
        "FOUNDRY_CONFIG": str(path),
        **extra,
    }


@contextlib.contextmanager
def worker_pool(
    home: Path, env: dict[str, str], queues: tuple[str, ...] = ("compute", "db")
) -> Iterator[dict[str, Worker]]:
    """One worker per queue, started and ready; stopped and the test Redis database flushed afterwards."""
    redis_or_skip()
    redis_flush()
    pool = {queue: Worker(queue, env, home) for queue in queues}
    try:
        start_all(pool)
        yield pool
    finally:
        for worker in pool.values():
            worker.stop()
        redis_flush()


def start_all(pool: dict[str, Worker]) -> None:
    for worker in pool.values():
        worker.start()
    for worker in pool.values():
        worker.wait_ready()


@contextlib.contextmanager
def broker_mode() -> Iterator[None]:
    """Point this process's Celery app at the test broker (it runs eagerly otherwise)."""
    keys = ("broker_url", "result_backend", "task_always_eager")
    saved = {key: celery_app.conf[key] for key in keys}
    celery_app.conf.update(broker_url=REDIS_URL, result_backend=REDIS_URL, task_always_eager=False)
    reset_connections()
    try:
        yield
    finally:
        celery_app.conf.update(saved)
        reset_connections()


def reset_connections() -> None:
    """Forget the cached result backend and broker pool, so the next use reads the new settings."""
    celery_app._backend_cache = None
    celery_app._local.__dict__.pop("backend", None)
    celery_app._after_fork()
