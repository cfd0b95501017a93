"""Does an LLM answer better when the extractive reader's chosen units come first in its context?

    /work/main/.venv/bin/python bench/reader_first_context.py [--model local/smollm2-135m] [--per-kind 40]
        [--squad FILE] [--kb-articles 5] [--seed 0] [--json out.json]

The same SQuAD 2.0 dev questions (answerable and in-corpus unanswerable, from the knowledge base
``foundry eval answers`` builds) are answered twice by ``answer_question`` with the LLM as
``generation.model``: as shipped (the passages in rank order), and with one more passage in front,
``S1``, holding the reader's chosen units verbatim (the other passages follow as S2…). The grounding
check is the same in both. Reported per variant: answerable questions whose answer holds a gold
answer, HasAns F1, and unanswerable questions answered.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from dataclasses import replace
from pathlib import Path

import _common  # noqa: F401  (Django set-up)
from django.conf import settings
from django.test.utils import override_settings

from foundry_site.evaluation.answers import holds_gold, prediction_text, sample, squad_index
from foundry_site.evaluation.squad import f1_score, load_squad
from generation import answers, reader
from generation.answers import compose
from retrieval.services.retrieve import Candidate


def reader_first(original):  # noqa: ANN001, ANN201 (wraps compose._context)
    def context(retrieval, model, request):  # noqa: ANN001, ANN202
        conf = settings.FOUNDRY.generation
        top = retrieval.candidates[: conf.max_passages]
        reading = reader.read(
            retrieval.question,
            [compose.reader_passage(c, i) for i, c in enumerate(top, 1)],
            embedding_model=settings.FOUNDRY.embedding.model,
            max_units=conf.reader_max_units,
        )
        if not reading.quotes:
            return original(retrieval, model, request)
        first = top[0].chunk
        quoted = replace_chunk(first, "\n".join(q.quoted for q in reading.quotes))
        shifted = [Candidate(quoted, top[0].score, top[0].fused, {}, label="S1")]
        shifted += [Candidate(c.chunk, c.score, c.fused, c.ranks, label=f"S{i}") for i, c in enumerate(top, start=2)]
        return original(replace(retrieval, candidates=shifted), model, request)

    return context


def replace_chunk(chunk, text):  # noqa: ANN001, ANN201
    from sources.models import Chunk

    return Chunk(
        source=chunk.source,
        ordinal=chunk.ordinal,
        text=text,
        heading=chunk.heading,
        page_start=chunk.page_start,
        page_end=chunk.page_end,
        line_start=chunk.line_start,
        line_end=chunk.line_end,
        token_count=0,
    )


def ask(questions: list, model: str) -> list[dict]:
    rows = []
    conf = settings.FOUNDRY.with_overrides(generation={"model": model, "cache_answers": False})
    with override_settings(FOUNDRY=conf):
        for q in questions:
            a = answers.answer_question(question=q.question)
            said = "" if a.answer_class == "no_evidence" else prediction_text(a.answer)
            rows.append(
                {
                    "qid": q.qid,
                    "impossible": q.impossible,
                    "answered": bool(said),
                    "holds_gold": holds_gold(said, list(q.answers)) if not q.impossible else False,
                    "f1": f1_score(said, list(q.answers)) if not q.impossible else 0.0,
                }
            )
    return rows


def summary(rows: list[dict]) -> dict:
    has = [r for r in rows if not r["impossible"]]
    no = [r for r in rows if r["impossible"]]
    return {
        "holds_gold": round(sum(r["holds_gold"] for r in has) / len(has), 4),
        "HasAns_f1": round(100 * sum(r["f1"] for r in has) / len(has), 2),
        "answered_impossible": round(sum(r["answered"] for r in no) / len(no), 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--squad", type=Path, default=_common.DEFAULT_DATA.parent / "squad2" / "dev.json")
    parser.add_argument("--kb-articles", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--per-kind", type=int, default=40)
    parser.add_argument("--model", default="local/smollm2-135m")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    start = time.perf_counter()
    articles = load_squad(args.squad)
    kb, asked = sample(articles, kb_articles=args.kb_articles, limit=3 * args.per_kind, seed=args.seed)
    questions = asked["answerable"] + asked["impossible"]
    random.Random(args.seed).shuffle(questions)
    results = {}
    with squad_index(args.squad, kb):
        results["as shipped"] = summary(ask(questions, args.model))
        original = compose._context
        compose._context = reader_first(original)
        try:
            results["reader's units first"] = summary(ask(questions, args.model))
        finally:
            compose._context = original
    print(
        f"machine: {_common.machine_line()}; {time.perf_counter() - start:.0f} s; model {args.model}; "
        f"{len(questions)} questions (the eval's first {args.per_kind} answerable and unanswerable)"
    )
    for name, s in results.items():
        print(
            f"  {name:<22} holds gold {s['holds_gold']:.3f}  HasAns F1 {s['HasAns_f1']:.1f}  "
            f"unanswerable answered {s['answered_impossible']:.3f}"
        )
    if args.json:
        args.json.write_text(
            json.dumps(
                {"results": results, "model": args.model, "machine": _common.machine_line(), "per_kind": args.per_kind},
                indent=1,
            )
        )


if __name__ == "__main__":
    main()
