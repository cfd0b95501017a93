"""``foundry serve`` (gunicorn) and ``foundry worker`` (a Celery worker on chosen queues)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TextIO

from django.conf import settings

QUEUES = ("compute", "db")


def add_parsers(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("serve", help="run the production web server (gunicorn) for a single-machine install")
    s.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    s.add_argument("--port", type=int, default=8000)
    s.add_argument("--workers", type=int, default=2, help="gunicorn worker processes (default 2)")
    s.add_argument(
        "--threads",
        type=int,
        default=4,
        help="threads per worker (default 4): refusals and cached answers are served while "
        "another thread waits for the model",
    )
    s.add_argument("--timeout", type=int, default=120, help="seconds before a silent web worker is restarted")
    s.set_defaults(handler=serve_command)

    w = sub.add_parser("worker", help="run a Celery worker (needs FOUNDRY_BROKER_URL)")
    w.add_argument(
        "--queues",
        default="compute,db",
        help="comma-separated: compute (any machine), db (only the database host); default both",
    )
    w.add_argument(
        "--concurrency",
        type=int,
        default=settings.CELERY_WORKER_CONCURRENCY,
        help="worker processes (default FOUNDRY_WORKER_CONCURRENCY)",
    )
    w.add_argument("--name", default=None, help="worker name (default: the queues, e.g. compute@host)")
    w.add_argument(
        "--no-beat",
        action="store_true",
        help="do not run the beat schedule (stale-run sweeper, folder sync) in this db worker (run exactly one beat)",
    )
    w.add_argument("--loglevel", default="INFO")
    w.set_defaults(handler=worker_command)


def serve_argv(opts: argparse.Namespace) -> list[str]:
    # gthread, not the default sync worker: a sync worker cannot report to the master while it
    # answers, so a question that took longer than --timeout (model loading plus generation on
    # a busy machine) got the worker SIGKILLed mid-answer, and its replacement had to load the
    # models again (found by tests/reliability/test_load.py). A gthread worker's main loop keeps
    # reporting while its threads work; --timeout then only catches a worker that is really stuck.
    return [
        sys.executable,
        "-m",
        "gunicorn",
        "foundry_site.wsgi:application",
        "--config",
        "python:foundry_site.gunicorn_conf",  # hooks: each worker loads the embedding model as it starts
        "--bind",
        f"{opts.host}:{opts.port}",
        "--workers",
        str(opts.workers),
        "--worker-class",
        "gthread",
        # The application is imported once, in the master, before the workers fork: a worker started
        # later (after a crash or a --timeout kill) serves its first request at once.
        "--preload",
        "--threads",
        str(opts.threads),
        "--timeout",
        str(opts.timeout),
        "--chdir",
        str(settings.BASE_DIR),
        "--access-logfile",
        "-",
        "--error-logfile",
        "-",
        *control_socket_args(settings.FOUNDRY_HOME),
    ]


# The longest path a Unix socket may have (sun_path is 108 bytes on Linux, with its NUL).
SOCKET_PATH_MAX = 107


def control_socket_args(home: Path) -> list[str]:
    """gunicorn's control socket inside ``home``: its default (``~/.gunicorn/gunicorn.ctl``) is one per user,
    so a second server on another home took it over, and stopping either deleted the other's. A home whose
    path is too long for a socket gets none (gunicorn runs without it; ``foundry serve`` says so)."""
    path = home / "gunicorn.ctl"
    if len(os.fsencode(path)) > SOCKET_PATH_MAX:
        return ["--no-control-socket"]
    return ["--control-socket", str(path)]


def serve_command(opts: argparse.Namespace, out: TextIO) -> int:
    # Static files need no collectstatic step: WhiteNoise serves them from the apps (WHITENOISE_USE_FINDERS).
    argv = serve_argv(opts)
    workers = f"{opts.workers} gunicorn worker{'' if opts.workers == 1 else 's'}"
    out.write(f"Serving on http://{opts.host}:{opts.port}/ with {workers}\n")
    if "--no-control-socket" in argv:
        out.write(f"No control socket: FOUNDRY_HOME ({settings.FOUNDRY_HOME}) is too long a path for one.\n")
    out.flush()
    os.execv(argv[0], argv)
    return 0  # not reached: exec replaces this process


def worker_argv(opts: argparse.Namespace) -> tuple[list[str], dict[str, str]]:
    """The ``celery worker`` command line and environment for ``foundry worker``."""
    queues = [q.strip() for q in opts.queues.split(",") if q.strip()]
    unknown = sorted(set(queues) - set(QUEUES))
    if unknown or not queues:
        raise ValueError(f"unknown queue(s) {', '.join(unknown) or '(none)'}; choose from {', '.join(QUEUES)}")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(settings.BASE_DIR), env.get("PYTHONPATH", "")]))
    if "db" not in queues:
        env["FOUNDRY_COMPUTE_ONLY"] = "1"  # this worker must never open the SQLite file
    name = opts.name or "+".join(queues)
    argv = [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "foundry_site",
        "worker",
        "-Q",
        ",".join(queues),
        "-n",
        f"{name}@%h",
        "-c",
        str(opts.concurrency),
        "--loglevel",
        opts.loglevel,
    ]
    if "db" in queues and not opts.no_beat:
        argv += ["--beat", "--schedule", settings.CELERY_BEAT_SCHEDULE_FILENAME]
    return argv, env


def worker_command(opts: argparse.Namespace, out: TextIO) -> int:
    if not settings.CELERY_BROKER_URL:
        raise ValueError(
            "no broker configured: set FOUNDRY_BROKER_URL (e.g. redis://127.0.0.1:6379/0). "
            "Without one, tasks run in-process and no worker is needed."
        )
    argv, env = worker_argv(opts)
    out.write(f"Starting: {' '.join(argv[1:])}\n")
    out.flush()
    os.execve(argv[0], argv, env)
    return 0  # not reached
