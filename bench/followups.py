"""Follow-up questions answered from the right source, with and without the condensing rule; and the
time to the first streamed sentence of ``/v1/chat/completions`` against the time to the full answer.

    PYTHONPATH=. .venv/bin/python bench/followups.py [--json docs/results/followups_DATE.json]

Ingests knowledge_base/ into a throw-away FOUNDRY_HOME (summaries off) with the configured (default:
extractive, offline) reader and the answer cache off. For every conversation of tests/data/followups.json
the last turn is asked (a) as typed, (b) as the standalone question ``generation.condense`` makes of it and
(c) as the standalone question written by hand (the ceiling: what the reader answers when condensing is perfect).
A turn counts as answered from the right source when the answer is not a refusal, cites one of the
expected sources and holds the expected fragment (``*_source_only``: the first two without the fragment).

Streaming is timed in-process through Django's test client (warm: models loaded, no network), from the
request to the first chunk with content and to ``[DONE]``.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
os.environ.update(FOUNDRY_HOME=tempfile.mkdtemp(prefix="foundry-followups-"),
                  DJANGO_SETTINGS_MODULE="foundry_site.settings")
os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(ROOT))

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402

from generation.answers import Answer, answer_question  # noqa: E402
from generation.condense import condense, is_followup  # noqa: E402
from sources.services.ingest import knowledge_base_ingest  # noqa: E402
from tests.conftest import config_with  # noqa: E402

DATA = ROOT / "tests" / "data" / "followups.json"
STREAM_QUESTIONS = ["How many sensors can be connected to the RS-485 bus?", "What is the default sampling interval?",
                    "Which port does MQTT over TLS use?", "What does error code E04 mean?",
                    "How long must the RESET button be held for a factory reset?",
                    "What is the main input voltage range?", "Where is the firmware update page in the web UI?",
                    "How much does the AX-200 weigh?", "What is the maximum bus length at 9600 baud?",
                    "How many measurements does the internal buffer hold?"]


def right_source(answer: Answer, case: dict, *, fragment: bool = True) -> bool:
    """Answered (not refused), citing an expected source and (``fragment``) holding the expected text."""
    cited = {c["source"] for c in answer.citations}
    return (not answer.refusal and bool(cited & set(case["sources"]))
            and (not fragment or case["fragment"].casefold() in answer.answer.casefold()))


def followups() -> dict:
    cases = json.loads(DATA.read_text())["conversations"]
    rows = []
    for case in cases:
        *history, message = case["turns"]
        condensed = condense(message, history)
        raw = answer_question(question=message)
        rewritten = answer_question(question=condensed.question) if condensed.rewritten else raw
        ideal = answer_question(question=case["standalone"])
        rows.append({"id": case["id"], "question": condensed.question, "rewritten": condensed.rewritten,
                     "raw_ok": right_source(raw, case), "condensed_ok": right_source(rewritten, case),
                     "standalone_ok": right_source(ideal, case), "answer": rewritten.answer[:160],
                     "raw_source": right_source(raw, case, fragment=False),
                     "condensed_source": right_source(rewritten, case, fragment=False),
                     "standalone_source": right_source(ideal, case, fragment=False)})
        marks = " ".join(f"{k}={'ok' if rows[-1][k + '_ok'] else '--'}" for k in ("raw", "condensed", "standalone"))
        print(f"{case['id']:20} {marks}  {condensed.question}", flush=True)
    n = len(rows)
    # The other side of the rule: a standalone question asked mid-conversation should pass unchanged.
    flagged = [c["standalone"] for c in cases if is_followup(c["standalone"])]
    return {"conversations": n, "standalone_flagged": f"{len(flagged)}/{n}",
            "rewritten": sum(r["rewritten"] for r in rows),
            "raw_right_source": round(sum(r["raw_ok"] for r in rows) / n, 3),
            "condensed_right_source": round(sum(r["condensed_ok"] for r in rows) / n, 3),
            "standalone_right_source": round(sum(r["standalone_ok"] for r in rows) / n, 3),
            **{f"{k}_source_only": round(sum(r[f"{k}_source"] for r in rows) / n, 3)
               for k in ("raw", "condensed", "standalone")}, "rows": rows}


def streaming() -> dict:
    from django.contrib.auth.models import User
    from django.test import Client

    from foundry_site.services.tokens import token_create

    User.objects.create_superuser("bench", password=None)
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token_create(username='bench').plain}")
    first, full = [], []
    for question in STREAM_QUESTIONS:
        body = json.dumps({"model": "foundry", "stream": True, "messages": [{"role": "user", "content": question}]})
        start = time.perf_counter()
        response = client.post("/v1/chat/completions", body, content_type="application/json")
        seen = None
        for part in response.streaming_content:
            if seen is None and b'"content": "' in part and b'"content": ""' not in part:
                seen = time.perf_counter() - start
        full.append((time.perf_counter() - start) * 1000)
        first.append((seen or 0.0) * 1000)
    return {"questions": len(STREAM_QUESTIONS), "first_sentence_p50_ms": round(statistics.median(first), 1),
            "full_answer_p50_ms": round(statistics.median(full), 1),
            "first_sentence_max_ms": round(max(first), 1), "full_answer_max_ms": round(max(full), 1)}


def main() -> dict:
    settings.FOUNDRY = config_with(settings.FOUNDRY, ingest={"summary_model": "none"},
                                   generation={"cache_answers": False})
    settings.FOUNDRY_QUERY_RATE = 0
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]  # Django's test client
    call_command("migrate", verbosity=0)
    knowledge_base_ingest(target=ROOT / "knowledge_base")
    answer_question(question="warm-up: what is the AX-200?")  # load the models outside the timings
    result = {"reader": settings.FOUNDRY.generation.model, "followups": followups(), "streaming": streaming()}
    print(json.dumps({k: v for k, v in result["followups"].items() if k != "rows"}, indent=1))
    print(json.dumps(result["streaming"], indent=1))
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="write the full result here")
    args = parser.parse_args()
    outcome = main()
    if args.json:
        args.json.write_text(json.dumps(outcome, indent=1) + "\n")
