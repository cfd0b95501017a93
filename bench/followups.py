"""Follow-up questions answered from the right source, with and without the condensing rule; and the
time to the first streamed sentence of ``/v1/chat/completions`` against the time to the full answer.

    PYTHONPATH=. .venv/bin/python bench/followups.py [--data FILE ...] [--squad FILE] [--no-streaming]
        [--condense-model rule|MODEL] [--followup-passages N] [--json bench/results/followups_DATE.json] [--units]

Ingests knowledge_base/ into a throw-away FOUNDRY_HOME (summaries off) with the configured (default:
extractive, offline) reader and the answer cache off. The ``--data`` files (default: all twenty):
tests/data/followups.json, the set the rule was tuned on; followups_heldout.json and followups_fresh.json,
tuned on after they were first measured; followups_blind.json to followups_blind13.json (tuned on after they
were first measured; blind6 and blind7 only from 2026-11-27, blind10 and blind11 from 2026-11-28; blind12, 13 not),
written from knowledge_base/ alone by someone who had seen neither the rule, the reader nor the other sets;
followups_unanswerable.json to followups_unanswerable4.json, follow-ups the sources do not answer, written the same
way.

For every conversation the last turn is asked (a) as typed, (b) as the standalone question
``retrieval.condense_model`` makes of it (``--condense-model``; default foundry.yaml's, the rule of
``generation.condense``), with the message logged beside it and the answer of the turn whose topic it
carries read with it (that turn answered first), as the product asks it, and (c) as the
standalone question written by hand (the ceiling: what the reader answers when condensing is perfect);
(d) ``switch``: the hand-written question asked after the next conversation's first turn, a change of topic
the rule must not spoil; (e) ``unnamed``: the hand-written question with "the AX-200" called "the gateway", as a
user of one product asks, asked alone, and (f) ``unnamed_switch``: asked after the next conversation's first turn.
A question that names nothing is a follow-up to the rule, so (f) measures what carrying the earlier topic into
a new question costs, against (e). A turn counts as answered from the right source when the answer is not a refusal,
cites one of the expected sources and holds the expected fragment (``*_source_only``: the first two without
the fragment); in the unanswerable set, when it is a refusal.

``--squad FILE`` (SQuAD 2.0 layout) adds a set: two consecutive answerable questions about one
paragraph, the second asked after the first, on a knowledge base of ``--squad-articles`` articles (the
``foundry eval answers`` index, cached under ``--squad-cache``). Right source: not refused, a cited chunk
of the question's article holds a gold answer; with ``fragment`` the answer holds one too. SQuAD
questions were written to stand alone, so this set mostly measures what the rule must not break. The same
number of pairs of an answerable and an unanswerable question about one paragraph measure the other side:
the share of unanswerable follow-ups answered (lower is better).

``--units`` keeps in each conversation's row the units its last turn's reading scored, with what was measured of each
(for ``bench/fit_scoring.py``).

Streaming is timed in-process through Django's test client (warm: models loaded, no network), from the
request to the first chunk with content and to ``[DONE]``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
os.environ.update(
    FOUNDRY_HOME=tempfile.mkdtemp(prefix="foundry-followups-"), DJANGO_SETTINGS_MODULE="foundry_site.settings"
)
os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(ROOT))

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402

from generation.answers import Answer, answer_question  # noqa: E402
from generation.condense import Condensed, is_followup, question_standalone  # noqa: E402
from generation.reader import stored_quotes  # noqa: E402
from sources.services.ingest_jobs import knowledge_base_ingest  # noqa: E402
from tests.conftest import config_with  # noqa: E402

import _units  # noqa: E402

WITH_UNITS = False  # --units: each conversation's row keeps the units its follow-up's reading scored

DATA = [
    ROOT / "tests" / "data" / f"followups{suffix}.json"
    for suffix in (
        *("", "_heldout", "_fresh", "_blind", "_blind2", "_blind3", "_blind4", "_blind5", "_blind6", "_blind7"),
        *("_blind8", "_blind9", "_blind10", "_blind11", "_blind12", "_blind13"),
        *("_unanswerable", "_unanswerable2", "_unanswerable3", "_unanswerable4"),
    )
]
SQUAD_PAIRS = 150
# "the AX-200" in a hand-written question, called "the gateway" in its unnamed variant (e)
PRODUCT = re.compile(r"\b(?:(?:the|an|a) )?AX-?200\b", re.IGNORECASE)
STREAM_QUESTIONS = [
    "How many sensors can be connected to the RS-485 bus?",
    "What is the default sampling interval?",
    "Which port does MQTT over TLS use?",
    "What does error code E04 mean?",
    "How long must the RESET button be held for a factory reset?",
    "What is the main input voltage range?",
    "Where is the firmware update page in the web UI?",
    "How much does the AX-200 weigh?",
    "What is the maximum bus length at 9600 baud?",
    "How many measurements does the internal buffer hold?",
]


def right_source(answer: Answer, case: dict, *, fragment: bool = True) -> bool:
    """Answered (not refused), citing an expected source and (``fragment``) holding the expected text; for a
    conversation whose answer the sources do not state (no ``sources``), refused."""
    if "sources" not in case:
        return bool(answer.refusal)
    cited = {c["source"] for c in answer.citations}
    return (
        not answer.refusal
        and bool(cited & set(case["sources"]))
        and (not fragment or case["fragment"].casefold() in answer.answer.casefold())
    )


def followup_answer(condensed: Condensed, history: list[str]) -> Answer:
    """The answer to a rewritten follow-up after ``history``, asked as the product asks it: the message logged
    beside it, read with the answer of the turn whose topic it carries (that turn asked as the product asked it)."""
    quoted: tuple[str, ...] = ()
    if condensed.carried and condensed.antecedent is not None:
        i = condensed.antecedent
        earlier = question_standalone(message=history[i], history=history[:i])
        prior = followup_answer(earlier, history[:i]) if earlier.rewritten else answer_question(question=history[i])
        quoted = stored_quotes(prior.grounding)
    return answer_question(question=condensed.question, message=condensed.message, quoted=quoted)


def _shares(rows: list[dict], kinds: tuple[str, ...]) -> dict:
    n = len(rows)
    return {
        **{f"{k}_right_source": round(sum(r[f"{k}_ok"] for r in rows) / n, 3) for k in kinds},
        **{f"{k}_source_only": round(sum(r[f"{k}_source"] for r in rows) / n, 3) for k in kinds},
        **{
            f"{k}_counts": f"{sum(r[f'{k}_ok'] for r in rows)}/{n} ({sum(r[f'{k}_source'] for r in rows)}/{n} "
            "source only)"
            for k in kinds
        },
    }


def followups(data: Path) -> dict:
    cases = json.loads(data.read_text())["conversations"]
    rows = []
    print(f"-- {data.relative_to(ROOT)}", flush=True)
    for case, other in zip(cases, cases[1:] + cases[:1]):
        *history, message = case["turns"]
        condensed = question_standalone(message=message, history=history)
        raw = answer_question(question=message)
        rewritten = followup_answer(condensed, history) if condensed.rewritten else raw
        ideal = answer_question(question=case["standalone"])
        # A change of topic: the hand-written question asked after another conversation's first turn.
        switched = question_standalone(message=case["standalone"], history=other["turns"][:1])
        switch = followup_answer(switched, other["turns"][:1]) if switched.rewritten else ideal
        # The same, with the product unnamed: a new question that names nothing.
        unnamed_question = PRODUCT.sub("the gateway", case["standalone"])
        unnamed = answer_question(question=unnamed_question) if unnamed_question != case["standalone"] else ideal
        unswitched = question_standalone(message=unnamed_question, history=other["turns"][:1])
        unnamed_switch = followup_answer(unswitched, other["turns"][:1]) if unswitched.rewritten else unnamed
        rows.append(
            {
                "id": case["id"],
                "question": condensed.question,
                "rewritten": condensed.rewritten,
                "antecedent": condensed.antecedent,
                "raw_ok": right_source(raw, case),
                "condensed_ok": right_source(rewritten, case),
                "standalone_ok": right_source(ideal, case),
                "switch_ok": right_source(switch, case),
                "switch_question": switched.question,
                "unnamed_ok": right_source(unnamed, case),
                "unnamed_switch_ok": right_source(unnamed_switch, case),
                "unnamed_switch_question": unswitched.question,
                "answer": rewritten.answer[:160],
                "refusal": rewritten.refusal,
                "cited": sorted({c["source"] for c in rewritten.citations}),
                "read_ms": rewritten.timings.get("read") if condensed.rewritten else None,
                "raw_source": right_source(raw, case, fragment=False),
                "condensed_source": right_source(rewritten, case, fragment=False),
                "standalone_source": right_source(ideal, case, fragment=False),
                "switch_source": right_source(switch, case, fragment=False),
                "unnamed_source": right_source(unnamed, case, fragment=False),
                "unnamed_switch_source": right_source(unnamed_switch, case, fragment=False),
            }
        )
        if WITH_UNITS:  # the product's reading of the follow-up and the fragment it should hold (bench/fit_scoring.py)
            rows[-1] |= {"fragment": case.get("fragment"), "units": _units.units(rewritten)}
        marks = " ".join(f"{k}={'ok' if rows[-1][k + '_ok'] else '--'}" for k in ("raw", "condensed", "standalone"))
        print(f"{case['id']:24} {marks}  {condensed.question}", flush=True)
    n = len(rows)
    # The other side of the rule: a standalone question asked mid-conversation should pass unchanged.
    flagged = [c["standalone"] for c in cases if is_followup(c["standalone"])]
    reads = sorted(r["read_ms"] for r in rows if r["read_ms"] is not None)
    return {
        "data": str(data.relative_to(ROOT)),
        "conversations": n,
        "standalone_flagged": f"{len(flagged)}/{n}",
        "rewritten": sum(r["rewritten"] for r in rows),
        # the reader's time on the rewritten follow-ups (warm, cache off; the machine's load is in "machine")
        "condensed_read_p50_ms": statistics.median(reads) if reads else None,
        **_shares(rows, ("raw", "condensed", "standalone", "switch", "unnamed", "unnamed_switch")),
        "rows": rows,
    }


def squad_pairs(squad: Path, *, articles: int, pairs: int, seed: int) -> tuple[list, list[tuple], list[tuple]]:
    """The knowledge-base articles, up to ``pairs`` (article, first, second) pairs of consecutive answerable
    questions about one paragraph, and up to ``pairs`` pairs of an answerable question and an unanswerable one
    about the same paragraph, sampled with ``seed``."""
    from foundry_site.evaluation.squad import load_squad

    everything = load_squad(squad)
    rng = random.Random(seed)
    kb = rng.sample(everything, articles)
    candidates, unanswerable = [], []
    for article in kb:
        by_paragraph: dict[int, list] = {}
        for question in article.questions:
            by_paragraph.setdefault(question.paragraph, []).append(question)
        for questions in by_paragraph.values():
            answerable = [q for q in questions if not q.impossible]
            candidates += [(article, first, second) for first, second in zip(answerable, answerable[1:])]
            unanswerable += [(article, answerable[0], q) for q in questions if q.impossible and answerable]
    return (
        kb,
        rng.sample(candidates, min(pairs, len(candidates))),
        rng.sample(unanswerable, min(pairs, len(unanswerable))),
    )


def squad_followups(squad: Path, *, articles: int, pairs: int, seed: int, cache: Path) -> dict:
    from django.test.utils import override_settings

    from foundry_site.evaluation.answers import squad_index
    from foundry_site.evaluation.squad import normalize_answer

    kb, chosen, unanswerable = squad_pairs(squad, articles=articles, pairs=pairs, seed=seed)
    rows = []
    print(f"-- {squad} ({articles} articles, {len(chosen)} question pairs)", flush=True)
    with override_settings(FOUNDRY_HOME=cache), squad_index(squad, kb) as index:

        def right(answer: Answer, article, golds: list[str], *, fragment: bool = True) -> bool:
            supporting = [
                c
                for c in answer.citations
                if index.doc_of_chunk.get(c["chunk_id"]) == article.title
                and any(g in normalize_answer(c.get("text", "")) for g in golds)
            ]
            return (
                not answer.refusal
                and bool(supporting)
                and (not fragment or any(g in normalize_answer(answer.answer) for g in golds))
            )

        for article, first, second in chosen:
            golds = [g for g in (normalize_answer(a) for a in second.answers) if g]
            condensed = question_standalone(message=second.question, history=[first.question])
            raw = answer_question(question=second.question)
            rewritten = followup_answer(condensed, [first.question]) if condensed.rewritten else raw
            rows.append(
                {
                    "id": second.qid,
                    "history": first.question,
                    "question": condensed.question,
                    "rewritten": condensed.rewritten,
                    "raw_ok": right(raw, article, golds),
                    "condensed_ok": right(rewritten, article, golds),
                    "raw_source": right(raw, article, golds, fragment=False),
                    "condensed_source": right(rewritten, article, golds, fragment=False),
                }
            )
            if condensed.rewritten:
                marks = " ".join(f"{k}={'ok' if rows[-1][k + '_ok'] else '--'}" for k in ("raw", "condensed"))
                print(f"{second.qid[:12]:14} {marks}  {first.question} || {condensed.question}", flush=True)
        # The other side: a follow-up the paragraph does not answer should stay refused.
        answered = {"raw": 0, "condensed": 0}
        for _article, first, second in unanswerable:
            condensed = question_standalone(message=second.question, history=[first.question])
            raw = answer_question(question=second.question)
            answered["raw"] += not raw.refusal
            followup = followup_answer(condensed, [first.question]) if condensed.rewritten else raw
            answered["condensed"] += not followup.refusal
    n = len(unanswerable)
    return {
        "data": str(squad),
        "kb_articles": sorted(a.title for a in kb),
        "seed": seed,
        "conversations": len(rows),
        "rewritten": sum(r["rewritten"] for r in rows),
        **_shares(rows, ("raw", "condensed")),
        "unanswerable_pairs": n,
        **{f"unanswerable_{k}_answered": f"{v}/{n} ({v / n:.1%})" for k, v in answered.items() if n},
        "rows": rows,
    }


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
    return {
        "questions": len(STREAM_QUESTIONS),
        "first_sentence_p50_ms": round(statistics.median(first), 1),
        "full_answer_p50_ms": round(statistics.median(full), 1),
        "first_sentence_max_ms": round(max(first), 1),
        "full_answer_max_ms": round(max(full), 1),
    }


def main(args: argparse.Namespace) -> dict:
    global answer_question, WITH_UNITS
    if args.units:
        _units.record()
        answer_question, WITH_UNITS = _units.asked(answer_question), True
    passages = args.followup_passages or settings.FOUNDRY.generation.reader_followup_passages
    settings.FOUNDRY = config_with(
        settings.FOUNDRY,
        ingest={"summary_model": "none"},
        generation={"cache_answers": False, "reader_followup_passages": passages},
        retrieval={"condense_model": args.condense_model or settings.FOUNDRY.retrieval.condense_model},
    )
    settings.FOUNDRY_QUERY_RATE = 0
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]  # Django's test client
    call_command("migrate", verbosity=0)
    knowledge_base_ingest(target=ROOT / "knowledge_base")
    answer_question(question="warm-up: what is the AX-200?")  # load the models outside the timings
    result = {
        "reader": settings.FOUNDRY.generation.model,
        "machine": machine(),
        "sets": [followups(data) for data in args.data],
    }
    if args.squad:
        result["sets"].append(
            squad_followups(
                args.squad, articles=args.squad_articles, pairs=args.squad_pairs, seed=args.seed, cache=args.squad_cache
            )
        )
    if args.streaming:
        result["streaming"] = streaming()
    for measured in result["sets"]:
        print(json.dumps({k: v for k, v in measured.items() if k != "rows"}, indent=1))
    if args.streaming:
        print(json.dumps(result["streaming"], indent=1))
    return result


def machine() -> str:
    import platform

    load = os.getloadavg()
    return (
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at the start"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, nargs="+", default=DATA, help="follow-up conversation files")
    parser.add_argument("--squad", type=Path, help="SQuAD 2.0 file for consecutive questions about one paragraph")
    parser.add_argument("--squad-articles", type=int, default=5, help="articles in the SQuAD knowledge base")
    parser.add_argument("--squad-pairs", type=int, default=SQUAD_PAIRS, help="question pairs to ask")
    parser.add_argument(
        "--squad-cache",
        type=Path,
        default=Path(os.environ["FOUNDRY_HOME"]),
        help="FOUNDRY_HOME whose eval-cache keeps the SQuAD index between runs",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--condense-model", help="retrieval.condense_model to condense with (default: foundry.yaml's)")
    parser.add_argument(
        "--followup-passages", type=int, help="generation.reader_followup_passages (default: foundry.yaml's)"
    )
    parser.add_argument("--no-streaming", dest="streaming", action="store_false", help="skip the streaming timings")
    parser.add_argument("--json", type=Path, help="write the full result here")
    parser.add_argument(
        "--units", action="store_true", help="keep each follow-up's scored units in its row (for bench/fit_scoring.py)"
    )
    args = parser.parse_args()
    args.data = [path.resolve() for path in args.data]
    outcome = main(args)
    if args.json:
        args.json.write_text(json.dumps(outcome, indent=1) + "\n")
