"""Long run of the parser fuzzer (tests/reliability/parser_fuzz.py): many examples per kind, every finding listed.

    PYTHONPATH=. .venv/bin/python bench/parser_fuzz.py [--examples 2000] [--kinds pdf,docx] [--out FILE.json]

Each kind's seed file is mutated by hypothesis and run through extract, chunking, sentence
windows and the unit splitter. Prints, per kind, how many inputs were read, refused with a
reason and found wrong (crash, hang, memory, broken chunk), the slowest input and the largest
peak of Python memory; writes the same as JSON with every finding's input size and detail.
Unlike the test, a finding does not stop the run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "foundry_site.settings")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import django  # noqa: E402

django.setup()

from django.conf import settings as django_settings  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402

from sources.services import enrich  # noqa: E402
from tests.reliability import parser_fuzz  # noqa: E402

KINDS = ("pdf", "docx", "pptx", "xlsx", "csv", "html", "json", "md", "txt", "png")


def run_kind(kind: str, seed: bytes, examples: int, sizing: enrich.ChunkSizing) -> dict:
    counts: Counter[str] = Counter()
    findings: list[dict] = []
    slowest = peak = 0.0

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(data=parser_fuzz.files(kind, seed))
    def one(data: bytes) -> None:
        nonlocal slowest, peak
        outcome = parser_fuzz.parse(f"fuzz.{kind}", data, count=sizing.count, max_tokens=sizing.max_chunk_tokens)
        counts[outcome.status] += 1
        slowest, peak = max(slowest, outcome.seconds), max(peak, outcome.peak_bytes)
        if outcome.finding and len(findings) < 50:
            findings.append({"status": outcome.status, "detail": outcome.detail, "bytes": len(data)})

    started = time.perf_counter()
    one()
    return {
        "kind": kind,
        "examples": sum(counts.values()),
        "counts": dict(counts),
        "findings": findings,
        "slowest_s": round(slowest, 3),
        "peak_mb": round(peak / 1048576, 1),
        "seconds": round(time.perf_counter() - started, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=2000, help="inputs per kind")
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    conf = django_settings.FOUNDRY
    sizing = enrich.ChunkSizing.for_model(conf.embedding.model, conf.ingest.chunk_tokens)
    seeds = parser_fuzz.seeds(Path(tempfile.mkdtemp(prefix="fuzz-seeds-")))
    rows = []
    for kind in args.kinds.split(","):
        row = run_kind(kind, seeds[f"seed.{kind}"], args.examples, sizing)
        rows.append(row)
        found = sum(v for k, v in row["counts"].items() if k not in ("read", "refused"))
        print(
            f"{kind:5} {row['examples']:6} inputs  read {row['counts'].get('read', 0):6}  "
            f"refused {row['counts'].get('refused', 0):6}  findings {found:3}  "
            f"slowest {row['slowest_s']:7.3f} s  peak {row['peak_mb']:6.1f} MB  ({row['seconds']} s)",
            flush=True,
        )
        for finding in row["findings"][:5]:
            print(f"      {finding['status']}: {finding['detail'][:160]}", flush=True)
    report = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
        "examples_per_kind": args.examples,
        "kinds": rows,
    }
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
