"""How long `foundry audit verify` (and the query-log page, which verifies afresh) takes per query-log row.

Writes N rows through ``audit_chain.query_record`` (each one chained) into a fresh SQLite file under a temporary
FOUNDRY_HOME, then times ``chain_verify``. Rows carry a 1,500-character answer and 8 citations, about what an
extractive answer logs.

    PYTHONPATH=$PWD .venv/bin/python bench/audit_verify.py --rows 10000
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10000)
    args = parser.parse_args()
    home = tempfile.mkdtemp(prefix="foundry-bench-audit-")
    os.environ.update(FOUNDRY_HOME=home, DJANGO_SETTINGS_MODULE="foundry_site.settings")
    os.environ.pop("FOUNDRY_DB", None)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from generation.audit_chain import QUERIES, chain_verify
    from generation.audit_chain import query_record

    started = time.perf_counter()
    for n in range(args.rows):
        query_record(
            run_id=f"bench-{n}",
            question=f"question {n}?",
            mode="hybrid",
            answer="x" * 1500,
            citations=[{"id": f"S{i}", "chunk_id": i, "text_sha256": "0" * 64} for i in range(8)],
            timings={"total": 100.0},
        )
    written = time.perf_counter() - started
    started = time.perf_counter()
    report = chain_verify(QUERIES)
    verified = time.perf_counter() - started
    assert report.ok and report.rows == args.rows
    print(f"rows {args.rows}: record {written / args.rows * 1000:.2f} ms/row; verify {verified:.2f} s "
          f"({args.rows / verified:.0f} rows/s)")  # fmt: skip


if __name__ == "__main__":
    main()
