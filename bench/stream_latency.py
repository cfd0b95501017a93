"""Time to the first streamed (verified) sentence against time to the whole answer, in-process and warm.

    .venv/bin/python bench/stream_latency.py [--rounds 5] [--model extractive|local/smollm2-135m] [--json out.json]

Ingests knowledge_base/ into a throw-away FOUNDRY_HOME, answers one question to load the models, then
asks every question of tests/data/sample_kb_questions.json ``--rounds`` times with the answer cache off,
each with ``on_sentence`` (what the ask page's stream and ``/v1/chat/completions`` with ``stream: true``
use). Per answer: milliseconds to the first sentence sent (answers that send none, refusals, are
counted apart), to the whole answer, and how many sentences were sent. With ``--model local/…`` the
reply is streamed from llama.cpp and grounded sentence by sentence.
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
    FOUNDRY_HOME=tempfile.mkdtemp(prefix="foundry-sbench-"), DJANGO_SETTINGS_MODULE="foundry_site.settings"
)
os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(ROOT))

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402

from generation.answers import answer_question  # noqa: E402
from sources.services.ingest_jobs import knowledge_base_ingest  # noqa: E402
from tests.conftest import config_with  # noqa: E402

QUESTIONS = [q["question"] for q in json.loads((ROOT / "tests" / "data" / "sample_kb_questions.json").read_text())]


def pct(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (as the dashboard computes it)."""
    if not values:
        return None
    values = sorted(values)
    return round(values[max(1, -(-len(values) * int(q * 100) // 100)) - 1], 1)


def timed(question: str) -> dict:
    start = time.perf_counter()
    sent: list[float] = []
    answer = answer_question(question=question, on_sentence=lambda _: sent.append(time.perf_counter() - start))
    total = time.perf_counter() - start
    return {
        "first_ms": sent[0] * 1000 if sent else None,
        "total_ms": total * 1000,
        "sentences": len(sent),
        "class": answer.answer_class,
        "refusal": answer.refusal,
        "llm_calls": answer.llm_calls,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--model", default="extractive")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    settings.FOUNDRY = config_with(settings.FOUNDRY, generation={"model": args.model, "cache_answers": False})
    call_command("migrate", verbosity=0)
    knowledge_base_ingest(target=ROOT / "knowledge_base")
    answer_question(question="warm-up: how many sensors can be connected to the RS-485 bus?")
    load = os.getloadavg()
    rows = [timed(q) for _ in range(args.rounds) for q in QUESTIONS]
    streamed = [r for r in rows if r["first_ms"] is not None]
    result = {
        "model": args.model,
        "questions": len(QUESTIONS),
        "rounds": args.rounds,
        "answers": len(rows),
        "answers_with_sentences": len(streamed),
        "load_avg_start": load,
        "load_avg_end": os.getloadavg(),
        "first_sentence_ms": {
            "p50": pct([r["first_ms"] for r in streamed], 0.5),
            "p95": pct([r["first_ms"] for r in streamed], 0.95),
        },
        "whole_answer_ms": {
            "p50": pct([r["total_ms"] for r in streamed], 0.5),
            "p95": pct([r["total_ms"] for r in streamed], 0.95),
        },
        "refused_whole_answer_ms": {"p50": pct([r["total_ms"] for r in rows if r["first_ms"] is None], 0.5)},
        "sentences_per_answer": {
            "p50": pct([float(r["sentences"]) for r in streamed], 0.5),
            "max": max((r["sentences"] for r in streamed), default=0),
        },
        "llm_calls": sum(r["llm_calls"] for r in rows),
    }
    print(json.dumps(result, indent=1))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
