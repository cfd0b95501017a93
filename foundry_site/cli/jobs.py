"""``foundry jobs``: list queued, running and failed background runs; retry one; sweep stale ones."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TextIO

from foundry_site.cli.display import safe
from core.jobs import stale_runs_sweep
from sources import selectors
from sources.services.ingest_jobs import JobStateError, ingest_job_retry


def positive_int(value: str) -> int:
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, not {number}")
    return number


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("jobs", help="list queued, running and failed jobs (with reasons); retry or sweep them")
    p.add_argument("--all", action="store_true", help="also list jobs that succeeded")
    p.add_argument("--limit", type=positive_int, default=20, help="at most this many jobs (default 20)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(handler=jobs_list_command)
    actions = p.add_subparsers(dest="jobs_action", metavar="ACTION")
    r = actions.add_parser("retry", help="re-queue a finished job's failed files (or a failed job's remainder)")
    r.add_argument("job_id", type=int)
    r.set_defaults(handler=jobs_retry_command)
    s = actions.add_parser(
        "sweep", help="re-queue or fail runs with no sign of life (the db worker does it every FOUNDRY_SWEEP_INTERVAL)"
    )
    s.add_argument(
        "--stale-after",
        type=float,
        default=None,
        metavar="SECONDS",
        help="idle time that makes a run stale (default FOUNDRY_JOB_STALE_SECONDS)",
    )
    s.set_defaults(handler=jobs_sweep_command)


def jobs_list_command(opts: argparse.Namespace, out: TextIO) -> int:
    rows = selectors.ingest_jobs_listing(include_finished=opts.all, limit=opts.limit)
    if opts.json:
        out.write(
            json.dumps(
                [
                    {
                        "id": r.id,
                        "kind": r.kind,
                        "status": r.status,
                        "stage": r.stage,
                        "files_done": r.files_done,
                        "files_total": r.files_total,
                        "chunks_done": r.chunks_done,
                        "files_failed": r.files_failed,
                        "attempts": r.attempts,
                        "idle_seconds": round(r.idle_seconds, 1),
                        "reason": r.reason,
                    }
                    for r in rows
                ]
            )
            + "\n"
        )
        return 0
    if not rows:
        hint = "" if opts.all else " (--all lists finished ones too)"
        out.write(f"No queued, running or failed jobs.{hint}\n")
        return 0
    out.write(
        f"  {'id':>5}  {'kind':<7} {'status':<10} {'stage':<11} {'files':>11} {'chunks':>7}  {'idle':>7}  reason\n"
    )
    for r in rows:
        files = f"{r.files_done}/{r.files_total}"
        idle = "" if r.finished_at else f"{r.idle_seconds:.0f}s"
        out.write(
            f"  {r.id:>5}  {r.kind:<7} {r.status:<10} {r.stage:<11} {files:>11} {r.chunks_done:>7}  "
            f"{idle:>7}  {safe(r.reason)}".rstrip()
            + "\n"
        )
    return 0


def jobs_retry_command(opts: argparse.Namespace, out: TextIO) -> int:
    try:
        job = ingest_job_retry(job_id=opts.job_id)
    except JobStateError as exc:
        sys.stderr.write(f"foundry jobs retry: {exc}\n")
        return 2
    if not job.is_finished:  # with a broker: a worker does it; follow it with `foundry jobs`
        out.write(f"Ingest job {job.pk} re-queued: {job.files_done}/{job.files_total} files done so far\n")
        return 0
    failed = [r for r in job.results if r["status"] == "failed"]
    out.write(
        f"Ingest job {job.pk} retried: {job.status}, {job.files_done}/{job.files_total} files done, "
        f"{len(failed)} failed\n"
    )
    for r in failed:
        out.write(f"  failed  {safe(r['path'])}  {safe(r['reason'])}\n")
    return 1 if failed or job.status != "succeeded" else 0  # as `foundry ingest`: a script sees the failure


def jobs_sweep_command(opts: argparse.Namespace, out: TextIO) -> int:
    from datetime import timedelta

    stale_after = timedelta(seconds=opts.stale_after) if opts.stale_after is not None else None
    actions = stale_runs_sweep(stale_after=stale_after)
    for a in actions:
        part = f" file {safe(a.part)}" if a.part else ""
        out.write(f"  {a.model} {a.run_id}{part}: {a.action} ({a.reason})\n")
    out.write(f"{len(actions)} stale run(s) or file(s) handled\n")
    return 0
