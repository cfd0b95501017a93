"""What a retrieval option does to the passages an answer is written from (no LLM call).

    /work/main/.venv/bin/python bench/passage_recall.py [--squad FILE] [--kb-articles 5] [--seed 0]
        [--limit 300] [--rrf-k 60] [--json out.json]

The knowledge base is the one ``foundry eval answers`` builds (same file, article
count and seed; cached under FOUNDRY_HOME/eval-cache). Every answerable in-corpus
question runs through the real ``retrieve()`` once per ``retrieval.fusion``
value; "hit@n" is the share of questions for which one of the first n passages
that pass the gate (the ones ``generation.max_passages`` hands to the model)
contains a gold answer. Out-of-corpus questions give the gate's refusal rate.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import _common  # noqa: F401  (Django set-up)
from django.conf import settings
from django.test.utils import override_settings

from foundry_site.evaluation.answers import sample, squad_index
from foundry_site.evaluation.squad import load_squad, normalize_answer
from retrieval.services.retrieve import retrieve

FUSIONS = ("chunk", "document")


def contains_answer(text: str, answers: tuple[str, ...]) -> bool:
    body = normalize_answer(text)
    return any(normalize_answer(a) and normalize_answer(a) in body for a in answers)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--squad", type=Path, default=_common.DEFAULT_DATA.parent / "squad2" / "dev.json")
    parser.add_argument("--kb-articles", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--limit", type=int, default=300, help="questions per kind at most")
    parser.add_argument("--rrf-k", type=int, default=None, help="retrieval.rrf_k (default: the configured one)")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    articles = load_squad(args.squad)
    kb, _ = sample(articles, kb_articles=args.kb_articles, limit=3, seed=args.seed)
    answerable = [q for a in kb for q in a.questions if not q.impossible][: args.limit]
    outside = [q for a in articles if a not in kb for q in a.questions][: args.limit]
    passages = settings.FOUNDRY.generation.max_passages
    results: dict = {
        "machine_start": _common.machine_line(),
        "answerable": len(answerable),
        "out_of_corpus": len(outside),
        "max_passages": passages,
        "rrf_k": args.rrf_k or settings.FOUNDRY.retrieval.rrf_k,
    }
    with squad_index(args.squad, kb):
        for fusion in FUSIONS:
            conf = settings.FOUNDRY.with_overrides(
                retrieval={"fusion": fusion, "rrf_k": args.rrf_k or settings.FOUNDRY.retrieval.rrf_k}
            )
            with override_settings(FOUNDRY=conf):
                start = time.perf_counter()
                hits = {1: 0, 3: 0, passages: 0}
                passed = 0
                for q in answerable:
                    found = retrieve(question=q.question, collection_ids=None)
                    passed += found.gate.passed
                    for n in hits:
                        hits[n] += any(contains_answer(c.chunk.text, q.answers) for c in found.candidates[:n])
                refused = sum(not retrieve(question=q.question, collection_ids=None).gate.passed for q in outside)
                row = {
                    **{f"hit@{n}": round(v / len(answerable), 4) for n, v in hits.items()},
                    "gate_passed_answerable": round(passed / len(answerable), 4),
                    "refused_out_of_corpus": round(refused / len(outside), 4),
                    "seconds": round(time.perf_counter() - start, 1),
                }
            results[fusion] = row
            print(f"fusion={fusion}: {row}", flush=True)
    results["machine_end"] = _common.machine_line()
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
