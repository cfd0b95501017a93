"""``generation.min_support`` swept on the answers eval: the same model replies, grounded at each threshold.

    nice .venv/bin/python bench/grounding_sweep.py --squad /work/shared/eval/squad2/dev.json \
        [--kb-articles 5] [--limit 90] [--seed 0] [--values 0.3,0.35,0.4,0.45,0.5,0.55,0.6] \
        [--number-rules near,anywhere] [--json FILE]

Runs ``foundry eval answers`` (``answers_evaluate``: same knowledge base, questions and
scoring) once per value. Generation is at temperature 0, so a prompt always gets the same
reply: each distinct model call is made once and its reply replayed for the other values
(the first run's ``llm.complete`` calls; embeddings are always computed). Grounding, the
answer class and every score are computed anew per value. Prints and writes, per value,
EM/F1, hallucination, false refusals, citation precision and coverage.

``--number-rules`` also replays each value under each rule for the numbers of a sentence:
``near`` (shipped, ``grounding.numbers_supported``: each number occurs in the passage next to
a word the sentence puts next to it) and ``anywhere`` (the rule before: each number occurs
somewhere in the passage window).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import _common
from django.conf import settings

from core import llm
from foundry_site.evaluation.answers import answers_evaluate, answers_summary
from core import grounding

HEADLINE = (
    "exact",
    "f1",
    "HasAns_f1",
    "NoAns_exact",
    "false_refusal_rate",
    "hallucination_rate",
    "hallucination_rate_impossible",
    "citation_precision",
    "attribution_coverage",
    "refusals_by_reason",
)


def replaying(complete):
    """``llm.complete`` that makes each distinct call once (the replies are deterministic at temperature 0)."""
    replies: dict[str, llm.Completion] = {}

    def call(**kwargs):
        if kwargs.get("temperature", 0.0) != 0.0:
            return complete(**kwargs)
        key = json.dumps(kwargs, sort_keys=True)
        if key not in replies:
            replies[key] = complete(**kwargs)
        return replies[key]

    return call, replies


NUMBER_RULES = {
    "near": grounding.numbers_supported,
    "anywhere": lambda sentence, passage: (
        set(grounding.number_contexts(sentence)) <= set(grounding.number_contexts(passage))
    ),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--squad", type=Path, required=True)
    parser.add_argument("--kb-articles", type=int, default=5)
    parser.add_argument("--limit", type=int, default=90)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--values", default="0.3,0.35,0.4,0.45,0.5,0.55,0.6")
    parser.add_argument("--number-rules", default="near")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    llm.complete, replies = replaying(llm.complete)
    shipped, results = settings.FOUNDRY, {}
    for rule in args.number_rules.split(","):
        for value in (float(v) for v in args.values.split(",")):
            settings.FOUNDRY = shipped.with_overrides(generation={"min_support": value})
            grounding.numbers_supported = NUMBER_RULES[rule]  # looked up by name on every sentence
            try:
                outcomes = answers_evaluate(
                    squad=args.squad, kb_articles=args.kb_articles, limit=args.limit, seed=args.seed
                ).outcomes
            finally:
                settings.FOUNDRY, grounding.numbers_supported = shipped, NUMBER_RULES["near"]
            summary = answers_summary(outcomes)
            results[f"{rule} {value}"] = {key: summary[key] for key in HEADLINE}
            print(
                json.dumps(
                    {
                        "numbers": rule,
                        "min_support": value,
                        **results[f"{rule} {value}"],
                        "model_calls_made": len(replies),
                    }
                ),
                flush=True,
            )
    results["machine"] = _common.machine_line()
    print(f"machine: {results['machine']}", file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
