"""``foundry audit verify``: check that the query log and the generation runs are as they were written."""

from __future__ import annotations

import argparse
from typing import TextIO

from generation.audit_chain import QUERIES, ChainReport, audit_verify

NAMES = {QUERIES: "query log"}
# More than this many breaks of one chain are counted, not listed.
LISTED = 10


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("audit", help="the audit trail's hash chain")
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    v = actions.add_parser(
        "verify",
        help="check every query-log row and finished generation run against its hash chain; "
        "exit 1 naming the first row that was changed, removed or inserted out of order",
    )
    v.set_defaults(handler=verify_command)


def verify_command(opts: argparse.Namespace, out: TextIO) -> int:
    reports = audit_verify()
    for report in reports:
        _report_write(report, out)
    return 0 if all(r.ok for r in reports) else 1


def _report_write(report: ChainReport, out: TextIO) -> None:
    name = NAMES.get(report.chain, "generation runs")
    head = f"head #{report.head_seq} {report.head_hash}"
    if report.ok:
        out.write(f"{name}: {report.rows} rows, the chain verifies ({head}).\n")
        return
    first = report.first
    assert first is not None  # not ok: there is a break
    out.write(f"{name}: BROKEN, first at {_where(first.row_id, first.seq)}: {first.detail}.\n")
    for more in report.breaks[1:LISTED]:
        out.write(f"  then at {_where(more.row_id, more.seq)}: {more.detail}.\n")
    if len(report.breaks) > LISTED:
        out.write(f"  … and {len(report.breaks) - LISTED} more.\n")
    out.write(f"  {report.rows} rows in the chain ({head}).\n")


def _where(row_id: int | None, seq: int | None) -> str:
    place = f"place {seq}" if seq is not None else "no place"
    return f"row {row_id} ({place})" if row_id is not None else place
