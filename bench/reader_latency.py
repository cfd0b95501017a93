"""Answer latency with the extractive reader, in-process and warm, on the sample knowledge base.

    .venv/bin/python bench/reader_latency.py [--rounds 5] [--json out.json]

Ingests knowledge_base/ into a throw-away FOUNDRY_HOME, answers one question to load the
embedding model, then asks every question of tests/data/sample_kb_questions.json ``--rounds``
times with the answer cache off. Prints P50/P95 of the whole answer and of each stage.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
os.environ.update(
    FOUNDRY_HOME=tempfile.mkdtemp(prefix="foundry-rbench-"), DJANGO_SETTINGS_MODULE="foundry_site.settings"
)
sys.path.insert(0, str(ROOT))

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402

from generation.answers import answer_question  # noqa: E402
from sources.services.ingest_jobs import knowledge_base_ingest  # noqa: E402
from tests.conftest import config_with  # noqa: E402

QUESTIONS = [q["question"] for q in json.loads((ROOT / "tests" / "data" / "sample_kb_questions.json").read_text())]


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return round(values[min(len(values) - 1, int(round(q * (len(values) - 1))))], 1) if values else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    settings.FOUNDRY = config_with(settings.FOUNDRY, generation={"model": "extractive", "cache_answers": False})
    call_command("migrate", verbosity=0)
    knowledge_base_ingest(target=ROOT / "knowledge_base")
    answer_question(question="warm-up: what is the AX-200?")
    rows = []
    load = os.getloadavg()
    for _ in range(args.rounds):
        for question in QUESTIONS:
            start = time.perf_counter()
            answer = answer_question(question=question)
            rows.append(
                {
                    "ms": (time.perf_counter() - start) * 1000,
                    "timings": answer.timings,
                    "class": answer.answer_class,
                    "llm_calls": answer.llm_calls,
                }
            )
    stages = sorted({s for r in rows for s in r["timings"]})
    result = {
        "questions": len(QUESTIONS),
        "rounds": args.rounds,
        "load_avg_start": load,
        "load_avg_end": os.getloadavg(),
        "llm_calls": sum(r["llm_calls"] for r in rows),
        "answer_ms": {"p50": pct([r["ms"] for r in rows], 0.5), "p95": pct([r["ms"] for r in rows], 0.95)},
        "per_stage_ms": {
            s: {
                "p50": pct([r["timings"][s] for r in rows if s in r["timings"]], 0.5),
                "p95": pct([r["timings"][s] for r in rows if s in r["timings"]], 0.95),
            }
            for s in stages
        },
    }
    print(json.dumps(result, indent=1))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
