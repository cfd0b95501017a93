"""Answers on real manuals in English, Dutch and German that nothing was tuned on: the LibreOffice Writer
guide pages Debian ships translated (bench/data/multilingual/, MPL-2.0; docs/benchmarks.md).

    PYTHONPATH=. .venv/bin/python bench/multilingual.py [--lang en nl de] [--split dev|blind]
        [--embedding-model local/all-minilm-l6-v2] [--json bench/results/multilingual-dev-DATE.json] [--units]
    PYTHONPATH=. .venv/bin/python bench/multilingual.py --check      # the data only: no model, no ingest

Per language, the 31 pages of ``<lang>/docs/`` are ingested into a fresh FOUNDRY_HOME (one child process
per language, so nothing is shared between them) with foundry.yaml's configuration (offline: the
extractive reader; ``--embedding-model`` replaces ``embedding.model``), and every question of
``<lang>/<split>.json`` is asked in-process through ``answer_question``, the function ``foundry query``
calls. An answerable question *holds* when the answer is not a refusal and its text holds one of the
``expected`` strings (case, whitespace and dash style ignored; a string under four characters must
stand as a word, so "dt" is not found in "width"); *right source*
when it also cites one of ``sources``. *Retrieved* (a diagnostic): a chunk of an expected source is
among the ``retrieval.top_k`` chunks ``retrieve()`` ranks for the question. An unanswerable question
(about the same software, answered by no page) counts when it is refused. A follow-up pair (``followups``):
its second turn asked after the first as the product asks a follow-up (made standalone by the condensing
rule, read with the first turn's answer), scored like an answerable question; ``typed_holds``: asked alone,
as typed. Rates carry Wilson 95 % intervals. ``--units`` keeps in each row the units its answer's reading scored, with
what was measured of each (``bench/fit_scoring.py`` fits the reader's weights on the dev split's).

The blind split is run once, at the end, to report: never to choose a setting or a rule on.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import unicodedata
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "bench" / "data" / "multilingual"
RESULTS = ROOT / "bench" / "results"
LANGUAGES = ("en", "nl", "de")
_DASHES = re.compile(r"[\u2010-\u2015\u2212]")
_SPACE = re.compile(r"\s+")
# Expected strings shorter than this match as whole words ("dt" is not found in "width"); longer ones anywhere,
# since the pages glue a shortcut's platform variants together ("CommandCtrl+F7").
SHORT = 4


def normalized(text: str) -> str:
    """Text as the match compares it: NFKC, casefolded, every dash a hyphen, runs of space one space."""
    text = _DASHES.sub("-", unicodedata.normalize("NFKC", text)).replace("\u00ad", "")
    return _SPACE.sub(" ", text).strip().casefold()


def holds(answer: str, expected: list[str]) -> str | None:
    """The first of ``expected`` that ``answer`` holds (see the module's docstring), else None."""
    text = normalized(answer)
    for wanted in expected:
        core = re.escape(normalized(wanted))
        short = len(wanted) < SHORT
        left = r"(?<!\w)" if short and re.match(r"\w", wanted) else ""
        right = r"(?!\w)" if short and re.search(r"\w$", wanted) else ""
        if re.search(left + core + right, text):
            return wanted
    return None


def load_split(lang: str, split: str) -> dict:
    path = DATA / lang / f"{split}.json"
    if not path.exists():
        raise SystemExit(f"{path}: no such question file (languages: {', '.join(LANGUAGES)}; splits: dev, blind)")
    return json.loads(path.read_text())


# --- the child: one language, its own FOUNDRY_HOME -------------------------------------------------------------


def child(
    lang: str, split: str, embedding_model: str | None, out: Path, answer_all: bool = False, with_units: bool = False
) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "foundry_site.settings")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    from generation.answers import answer_question
    from generation.condense import question_standalone
    from retrieval.services.retrieve import retrieve
    from sources.services.ingest_jobs import knowledge_base_ingest

    conf = settings.FOUNDRY
    if embedding_model:
        settings.FOUNDRY = conf = conf.with_overrides(embedding={"model": embedding_model})
    if answer_all:  # rows for bench/fit_answerability.py: the reader answers whatever its model says
        settings.FOUNDRY = conf.with_overrides(generation={"reader_min_score": 0.0, "reader_low_score": 0.0})
    if with_units:  # each row keeps the units its answer's reading scored (for bench/fit_scoring.py)
        import _units

        _units.record()
        answer_question = _units.asked(answer_question)
    call_command("migrate", verbosity=0)
    questions = load_split(lang, split)
    began = time.perf_counter()
    report = knowledge_base_ingest(target=DATA / lang / questions["corpus"])
    ingest_s = time.perf_counter() - began
    stored = report.count("ingested") + report.count("unchanged")
    if report.count("failed") or not stored:
        failed = [f for f in report.as_dict()["files"] if f["status"] == "failed"]
        reason = f"{failed[0]['path']}: {failed[0]['reason']}" if failed else "no file stored"
        raise SystemExit(f"{lang}: ingest failed for {len(failed)} of the pages ({reason})")
    rows = []
    for kind in ("answerable", "unanswerable"):
        for case in questions[kind]:
            rows.append(_asked(case, kind, answer_question, retrieve, with_units))
            print(f"{lang} {case['id']:8} {_marks(rows[-1])}  {case['question'][:70]}", file=sys.stderr, flush=True)
    for case in questions.get("followups", []):
        rows.append(_followup(case, answer_question, question_standalone, with_units))
        print(f"{lang} {case['id']:8} {_marks(rows[-1])}  {rows[-1]['question'][:70]}", file=sys.stderr, flush=True)
    out.write_text(
        json.dumps(
            {
                "language": lang,
                "embedding_model": settings.FOUNDRY.embedding.model,
                "reader": settings.FOUNDRY.generation.model,
                "documents": stored,
                "ingest_s": round(ingest_s, 1),
                "rows": rows,
            },
            ensure_ascii=False,
        )
    )


def _asked(case: dict, kind: str, answer_question, retrieve, with_units: bool = False) -> dict:
    began = time.perf_counter()
    answer = answer_question(question=case["question"])
    ms = (time.perf_counter() - began) * 1000
    cited = sorted({Path(c["source"]).name for c in answer.citations})
    row = {
        "id": case["id"],
        "kind": kind,
        "question": case["question"],
        "refused": bool(answer.refusal),
        "refusal": answer.refusal,
        "answer_class": answer.answer_class,
        "cited": cited,
        "answer": answer.answer[:400],
        "ms": round(ms, 1),
        "features": answer.grounding.get("features"),
    }
    if with_units:
        row["units"] = _units_of(answer)
    if kind == "answerable":
        found = None if answer.refusal else holds(answer.answer, case["expected"])
        ranked = [
            Path(c.chunk.source.name).name for c in retrieve(question=case["question"], collection_ids=None).ranked
        ]
        ranks = [i for i, name in enumerate(ranked, 1) if name in case["sources"]]
        row |= {
            "expected": case["expected"],
            "sources": case["sources"],
            "holds": found is not None,
            "right_source": found is not None and bool(set(cited) & set(case["sources"])),
            "retrieved_rank": ranks[0] if ranks else None,
        }
    return row


def _followup(case: dict, answer_question, question_standalone, with_units: bool = False) -> dict:
    """The second turn asked as the product asks a follow-up: made standalone by ``retrieval.condense_model``'s
    rule and read with the answer of the turn whose terms it carries (as bench/followups.py does); and as typed."""
    from generation.reader import stored_quotes

    first, message = case["turns"]
    condensed = question_standalone(message=message, history=[first])
    began = time.perf_counter()
    if condensed.rewritten:
        earlier = stored_quotes(answer_question(question=first).grounding) if condensed.carried else ()
        answer = answer_question(question=condensed.question, message=condensed.message, quoted=earlier)
    else:
        answer = answer_question(question=message)
    ms = (time.perf_counter() - began) * 1000
    typed = answer if not condensed.rewritten else answer_question(question=message)
    cited = sorted({Path(c["source"]).name for c in answer.citations})
    found = None if answer.refusal else holds(answer.answer, case["expected"])
    return ({"units": _units_of(answer)} if with_units else {}) | {
        "id": case["id"],
        "kind": "followup",
        "question": condensed.question,
        "rewritten": condensed.rewritten,
        "refused": bool(answer.refusal),
        "refusal": answer.refusal,
        "answer_class": answer.answer_class,
        "cited": cited,
        "answer": answer.answer[:400],
        "ms": round(ms, 1),
        "features": answer.grounding.get("features"),
        "expected": case["expected"],
        "sources": case["sources"],
        "holds": found is not None,
        "right_source": found is not None and bool(set(cited) & set(case["sources"])),
        "typed_holds": not typed.refusal and holds(typed.answer, case["expected"]) is not None,
    }


def _marks(row: dict) -> str:
    if row["kind"] == "unanswerable":
        return "refused " if row["refused"] else "ANSWERED"
    return "holds   " if row["holds"] else ("refused " if row["refused"] else "misses  ")


# --- the parent: a child per language, then the table ----------------------------------------------------------


def run_language(
    lang: str, split: str, embedding_model: str | None, answer_all: bool = False, with_units: bool = False
) -> dict:
    home = tempfile.mkdtemp(prefix=f"foundry-multilingual-{lang}-")
    out = Path(home) / "rows.json"
    command = [sys.executable, str(Path(__file__).resolve()), "--child", lang, "--split", split, "--out", str(out)]
    if embedding_model:
        command += ["--embedding-model", embedding_model]
    if answer_all:
        command.append("--answer-all")
    if with_units:
        command.append("--units")
    env = {
        **os.environ,
        "FOUNDRY_HOME": home,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    if subprocess.run(command, env=env, check=False).returncode:
        raise SystemExit(f"{lang}: the run failed (above); nothing written")
    return json.loads(out.read_text())


def summary(result: dict) -> dict:
    from foundry_site.evaluation.metrics import proportion_interval, rounded

    answerable = [r for r in result["rows"] if r["kind"] == "answerable"]
    unanswerable = [r for r in result["rows"] if r["kind"] == "unanswerable"]
    followups = [r for r in result["rows"] if r["kind"] == "followup"]

    def rate(rows: list[dict], key: str) -> dict:
        hits = sum(bool(r[key]) for r in rows)
        return {
            "hits": hits,
            "of": len(rows),
            "rate": round(hits / len(rows), 4) if rows else None,
            "ci95": rounded(proportion_interval(hits, len(rows))),
        }

    ms = sorted(r["ms"] for r in answerable + unanswerable)
    return {
        "holds": rate(answerable, "holds"),
        "right_source": rate(answerable, "right_source"),
        "answerable_refused": rate(answerable, "refused"),
        "retrieved": rate([{**r, "in": r["retrieved_rank"] is not None} for r in answerable], "in"),
        "retrieved_first": rate([{**r, "in": r["retrieved_rank"] == 1} for r in answerable], "in"),
        "unanswerable_refused": rate(unanswerable, "refused"),
        "followup_holds": rate(followups, "holds"),
        "followup_typed_holds": rate(followups, "typed_holds"),
        "answer_classes": {
            kind: _counts(r["answer_class"] for r in rows)
            for kind, rows in (("answerable", answerable), ("unanswerable", unanswerable))
        },
        "refusals": {
            kind: _counts(r["refusal"] for r in rows if r["refused"])
            for kind, rows in (("answerable", answerable), ("unanswerable", unanswerable))
        },
        "answer_p50_ms": ms[len(ms) // 2] if ms else None,
    }


def _counts(values: Iterable[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for value in values:
        counts[value] = counts.get(value, 0) + 1
    return dict(sorted(counts.items()))


def _cell(rate: dict) -> str:
    if not rate["of"]:
        return "–"
    low, high = rate["ci95"]
    return f"{rate['hits']}/{rate['of']} {100 * rate['rate']:.0f} % [{100 * low:.0f}–{100 * high:.0f}]"


def table(results: list[dict]) -> str:
    columns = [
        ("holds", "holds answer"),
        ("right_source", "+ right source"),
        ("answerable_refused", "answerable refused"),
        ("retrieved", "source in top-k"),
        ("unanswerable_refused", "unanswerable refused"),
        ("followup_holds", "follow-ups holding (rule)"),
    ]
    lines = [" | ".join(["lang", *(title for _, title in columns)]), " | ".join(["---"] * (len(columns) + 1))]
    for result in results:
        s = result["summary"]
        cells = [_cell(s[k]) for k, _ in columns]
        lines.append(" | ".join([result["language"], *cells]))
    return "\n".join(lines)


def machine_line() -> str:
    import platform

    load = os.getloadavg()
    return (
        f"{platform.platform()}, {os.cpu_count()} CPUs ({platform.processor() or platform.machine()}), "
        f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at the start"
    )


def check(languages: list[str]) -> int:
    """Every expected string is in the text Foundry extracts from one of its expected sources, and none is
    in its question; every question's sources exist. Reports what fails; exit status 1 if anything does."""
    sys.path.insert(0, str(ROOT))
    from sources.services.extract.html import extract_html

    problems = 0
    for lang in languages:
        docs = DATA / lang / "docs"
        text = {}
        for path in docs.glob("*.html"):
            extracted = extract_html(path.read_bytes(), fallback_title=path.stem)
            text[path.name] = "\n".join([extracted.title, *(b.text for b in extracted.blocks)])
        for split in ("dev", "blind"):
            questions = load_split(lang, split)
            turns = [{**c, "question": c["turns"][-1]} for c in questions.get("followups", [])]
            for case in questions["answerable"] + turns:
                if holds(case["question"], case["expected"]):
                    problems += 1
                    print(f"{lang} {split} {case['id']}: the question itself holds an expected string")
                missing = [s for s in case["sources"] if s not in text]
                if missing or not any(holds(text[s], case["expected"]) for s in case["sources"]):
                    problems += 1
                    print(f"{lang} {split} {case['id']}: expected {case['expected']} not in {case['sources']}")
        print(f"{lang}: {len(text)} pages checked")
    return 1 if problems else 0


def _units_of(answer) -> list[dict] | None:
    import _units

    return _units.units(answer)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lang", nargs="+", choices=LANGUAGES, default=list(LANGUAGES))
    parser.add_argument("--split", choices=("dev", "blind"), default="dev")
    parser.add_argument("--embedding-model", help="embedding.model to ingest and ask with (default: foundry.yaml's)")
    parser.add_argument(
        "--json", type=Path, help="where to write the result (default: bench/results/multilingual-SPLIT-DATE.json)"
    )
    parser.add_argument(
        "--answer-all", action="store_true", help="reader thresholds 0: every reading answered (for fit_answerability)"
    )
    parser.add_argument(
        "--units", action="store_true", help="keep each answer's scored units in its row (for bench/fit_scoring.py)"
    )
    parser.add_argument("--check", action="store_true", help="check the data against the pages' text and stop")
    parser.add_argument("--child", choices=LANGUAGES, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.check:
        raise SystemExit(check(args.lang))
    if args.child:
        child(args.child, args.split, args.embedding_model, args.out, args.answer_all, args.units)
        return
    sys.path.insert(0, str(ROOT))
    machine = machine_line()
    began = time.perf_counter()
    results = []
    for lang in args.lang:
        result = run_language(lang, args.split, args.embedding_model, args.answer_all, args.units)
        result["summary"] = summary(result)
        results.append(result)
    print(table(results))
    outcome = {
        "date": datetime.date.today().isoformat(),
        "split": args.split,
        "machine": machine,
        "wall_s": round(time.perf_counter() - began, 1),
        "languages": results,
    }
    RESULTS.mkdir(exist_ok=True)
    path = args.json or RESULTS / f"multilingual-{args.split}-{outcome['date']}.json"
    path.write_text(json.dumps(outcome, ensure_ascii=False, indent=1) + "\n")
    print(f"written: {path}")


if __name__ == "__main__":
    main()
