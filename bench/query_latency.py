"""End-to-end and per-stage query latency with the configured (default: local) models.

    .venv/bin/python bench/query_latency.py

Ingests knowledge_base/ into a throw-away FOUNDRY_HOME (summaries off), then asks each
question once with the answer cache off and prints P50/P95 per stage and per class.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
os.environ.update(
    FOUNDRY_HOME=tempfile.mkdtemp(prefix="foundry-qbench-"), DJANGO_SETTINGS_MODULE="foundry_site.settings"
)
sys.path.insert(0, str(ROOT))

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402

from generation.answers import answer_question  # noqa: E402
from sources.services.ingest_jobs import knowledge_base_ingest  # noqa: E402
from tests.conftest import config_with  # noqa: E402

IN_CORPUS = [
    "How many sensors can be connected to the RS-485 bus?",
    "What is the default sampling interval?",
    "Where is the firmware update page in the web UI?",
    "Which port does MQTT over TLS use?",
    "How long must the RESET button be held for a factory reset?",
    "What is the main input voltage range?",
    "What does error code E04 mean?",
    "What is the logic supply voltage VCC?",
]
OUT_OF_CORPUS = [
    "Who won the football world cup final in 1954?",
    "What is the boiling point of ethanol?",
    "Who painted the Mona Lisa?",
    "How do I bake sourdough bread?",
]


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return round(values[min(len(values) - 1, int(round(q * (len(values) - 1))))], 1) if values else 0.0


def main() -> dict:
    settings.FOUNDRY = config_with(
        settings.FOUNDRY, ingest={"summary_model": "none"}, generation={"cache_answers": False}
    )
    call_command("migrate", verbosity=0)
    knowledge_base_ingest(target=ROOT / "knowledge_base")
    answer_question(question="warm-up: what is the AX-200?")  # load both models outside the timings
    rows = []
    for question in IN_CORPUS + OUT_OF_CORPUS:
        start = time.perf_counter()
        answer = answer_question(question=question)
        rows.append(
            {
                "question": question,
                "class": answer.answer_class,
                "refusal": answer.refusal,
                "llm_calls": answer.llm_calls,
                "ms": round((time.perf_counter() - start) * 1000, 1),
                "timings": answer.timings,
                "answer": answer.answer[:160],
            }
        )
    stages = sorted({s for r in rows for s in r["timings"]})
    return {
        "load_avg_1m": os.getloadavg()[0],
        "model": settings.FOUNDRY.generation.model,
        "per_stage_ms": {
            s: {
                "p50": pct([r["timings"][s] for r in rows if s in r["timings"]], 0.5),
                "p95": pct([r["timings"][s] for r in rows if s in r["timings"]], 0.95),
            }
            for s in stages
        },
        "answered_ms": {
            "p50": pct([r["ms"] for r in rows if r["llm_calls"]], 0.5),
            "p95": pct([r["ms"] for r in rows if r["llm_calls"]], 0.95),
        },
        "refused_by_gate_ms": {"p50": pct([r["ms"] for r in rows if r["refusal"] == "gate"], 0.5)},
        "classes": {c: sum(1 for r in rows if r["class"] == c) for c in {r["class"] for r in rows}},
        "out_of_corpus_llm_calls": sum(r["llm_calls"] for r in rows if r["question"] in OUT_OF_CORPUS),
        "rows": rows,
    }


if __name__ == "__main__":
    print(json.dumps(main(), indent=2, ensure_ascii=False))
