"""``foundry sync [COLLECTION …] [--every 10m]``: re-ingest the folders bound to collections."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TextIO

from foundry_site.cli.display import safe
from core.config import parse_duration
from sources.services.sync import SyncResult, collections_sync


def duration(value: str) -> float:
    """argparse type for ``--every``: ``30s``, ``10m``, ``1h`` → seconds."""
    try:
        return parse_duration(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sync", help="re-ingest the folders bound to collections (foundry collections bind)")
    p.add_argument("collections", nargs="*", metavar="COLLECTION", help="only these collections (default: all bound)")
    p.add_argument(
        "--every",
        type=duration,
        default=None,
        metavar="DURATION",
        help="keep running: sync again every DURATION (30s, 10m, 1h) until stopped; without a broker "
        "this replaces the Celery beat schedule",
    )
    p.add_argument("--json", action="store_true", help="print one JSON line per round instead of a table")
    p.set_defaults(handler=sync_command)


def sync_command(opts: argparse.Namespace, out: TextIO) -> int:
    def one_round() -> int:
        if opts.every is not None and not opts.json:
            out.write(f"Sync at {datetime.now(UTC):%Y-%m-%d %H:%M:%S} UTC\n")
        results = collections_sync(names=opts.collections or None)
        out.write(format_results(results, as_json=opts.json))
        out.flush()
        return 1 if any(r.status == "failed" for r in results) else 0

    if opts.every is None:
        return one_round()
    try:
        sync_loop(one_round, every=opts.every)
    except KeyboardInterrupt:
        sys.stderr.write("\nSync stopped.\n")
        return 130
    return 0  # not reached: the loop ends only by an interrupt


def sync_loop(
    one_round: Callable[[], int],
    *,
    every: float,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Run ``one_round`` now and then every ``every`` seconds after the previous round started (a round that
    takes longer than that is followed at once by the next); runs until interrupted."""
    while True:
        started = clock()
        one_round()
        sleep(max(0.0, every - (clock() - started)))


def format_results(results: list[SyncResult], *, as_json: bool = False) -> str:
    if as_json:
        return json.dumps([r.as_dict() for r in results]) + "\n"
    if not results:
        return "No collection is bound to a folder (foundry collections bind COLLECTION FOLDER).\n"
    lines = [
        f"  {'collection':<20} {'status':<7} {'job':>5}  {'ingested':>8} {'unchanged':>9} {'removed':>7} "
        f"{'failed':>6}  folder / reason"
    ]
    for r in results:
        c = r.counts
        counts = (
            f"{c['ingested']:>8} {c['unchanged']:>9} {c['removed']:>7} {c['failed']:>6}"
            if c
            else f"{'':>8} {'':>9} {'':>7} {'':>6}"
        )
        job = str(r.job_id) if r.job_id else "-"
        lines.append(f"  {safe(r.collection):<20} {r.status:<7} {job:>5}  {counts}  {safe(r.folder)}")
        if r.reason:
            lines.append(f"      {safe(r.reason)}")
    return "\n".join(lines) + "\n"
