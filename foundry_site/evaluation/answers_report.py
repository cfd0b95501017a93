"""The written report of ``foundry eval answers``: predictions and the question subset in the official
SQuAD 2.0 layout (scored by ``evaluate-v2.0.py`` when given), report.md/json, plots and a row of eval.csv."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

from django.conf import settings

from core.config import EXTRACTIVE
from foundry_site.evaluation import report
from foundry_site.evaluation.answers import AnswersEvaluation, Outcome
from foundry_site.evaluation.beir import EvalDataError
from foundry_site.evaluation.squad import Article
from generation import answerability


def outcome_dict(outcome: Outcome) -> dict:
    return asdict(outcome)


def official_dataset(articles: list[Article], outcomes: list[Outcome]) -> dict:
    """The asked questions in SQuAD 2.0 layout for ``evaluate-v2.0.py``; out-of-corpus ones marked unanswerable."""
    kinds = {o.qid: o.kind for o in outcomes}
    data = []
    for article in articles:
        paragraphs = []
        for j, context in enumerate(article.paragraphs):
            qas = [
                {
                    "id": q.qid,
                    "question": q.question,
                    "is_impossible": kinds[q.qid] != "answerable",
                    "answers": [{"text": g, "answer_start": 0} for g in q.answers]
                    if kinds[q.qid] == "answerable"
                    else [],
                }
                for q in article.questions
                if q.paragraph == j and q.qid in kinds
            ]
            if qas:
                paragraphs.append({"context": context, "qas": qas})
        if paragraphs:
            data.append({"title": article.title, "paragraphs": paragraphs})
    return {"version": "v2.0", "data": data}


def official_score(scorer: Path, dataset: Path, predictions: Path, out: Path) -> dict:
    """Run the official ``evaluate-v2.0.py`` on the written files; its JSON output."""
    if not scorer.is_file():
        raise EvalDataError(f"{scorer}: no such file (the official SQuAD 2.0 scorer)")
    done = subprocess.run(
        [sys.executable, str(scorer), str(dataset), str(predictions), "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0:
        raise EvalDataError(f"{scorer} failed: {done.stderr.strip()[-500:]}")
    return json.loads(out.read_text(encoding="utf-8"))


def answers_report(
    result: AnswersEvaluation, *, articles: list[Article], folder: Path, eval_id: str, official_scorer: Path | None
) -> dict:
    """Write predictions (official format), the question subset, report.md/json and plots; append eval.csv."""
    folder.mkdir(parents=True, exist_ok=True)
    summary = result.summary()
    predictions, dataset = folder / "predictions.json", folder / "dataset.json"
    predictions.write_text(json.dumps(result.predictions(), ensure_ascii=False, indent=1), encoding="utf-8")
    dataset.write_text(json.dumps(official_dataset(articles, result.outcomes), ensure_ascii=False), encoding="utf-8")
    if official_scorer is not None:
        summary["official"] = official_score(official_scorer, dataset, predictions, folder / "official.json")
    rates = {
        k: summary[k] or 0.0
        for k in (
            "refusal_rate_out_of_corpus",
            "false_refusal_rate",
            "hallucination_rate",
            "citation_precision",
            "attribution_coverage",
        )
    }
    report.bars_plot(
        folder / "answers.png",
        title=f"Answers ({summary['questions']} questions)",
        groups={"rate": rates, "score/100": {k: summary[k] / 100 for k in ("exact", "f1", "HasAns_f1", "NoAns_f1")}},
    )
    report.latency_plot(
        folder / "latency.png",
        title="Latency per stage",
        series={
            s: [o.timings[s] for o in result.outcomes if s in o.timings]
            for s in ("search", "read", "generate", "grounding", "total")
        },
    )
    host = {**report.machine(), "loadavg_start": result.load_start}
    conf = settings.FOUNDRY
    config = {
        "generation.model": conf.generation.model,
        "retrieval.mode": conf.retrieval.mode,
        "min_score": conf.retrieval.min_score,
        "min_chunks": conf.retrieval.min_chunks,
        "min_support": conf.generation.min_support,
        "hyde": conf.retrieval.hyde,
    }
    if conf.generation.model == EXTRACTIVE:  # the thresholds the reader used: foundry.yaml's, else the fitted ones
        model = answerability.model_for(conf.embedding.model)
        refuse, low = answerability.thresholds(
            model, conf.generation.reader_min_score, conf.generation.reader_low_score
        )
        config |= {"reader_min_score": refuse, "reader_low_score": low}
    payload = {
        "eval_id": eval_id,
        "kind": "answers",
        **summary,
        "dataset": result.dataset,
        "kb_articles": result.kb_articles,
        "index": result.index,
        "config": config,
        "machine": host,
        "outcomes": [outcome_dict(o) for o in result.outcomes],
    }
    report.report_write(folder, payload=payload, markdown=answers_markdown(eval_id, result, summary, config, host))
    report.eval_csv_append(
        eval_id=eval_id,
        kind="answers",
        dataset=result.dataset["squad"],
        dataset_sha256=result.dataset["sha256"],
        questions=summary["questions"],
        modes=conf.retrieval.mode,
        headline="f1",
        headline_value=summary["f1"],
        metrics={k: v for k, v in summary.items() if k not in ("latency_ms", "official")},
        report=str(folder),
    )
    return summary


def answers_markdown(eval_id: str, result: AnswersEvaluation, summary: dict, config: dict, host: dict) -> str:
    def pct(value: float | None) -> str:
        return "n/a" if value is None else f"{100 * value:.1f}%"

    def ci(key: str, scale: float = 100) -> str:
        interval = summary["ci95"][key]
        return f" (95 %: {scale * interval[0]:.1f}–{scale * interval[1]:.1f})" if interval else ""

    counts = summary["counts"]
    lines = [
        f"# Answers evaluation {eval_id}",
        "",
        f"- data: `{result.dataset['squad']}` (sha256 {result.dataset['sha256'][:12]}), seed "
        f"{result.dataset['seed']}; knowledge base: {', '.join(result.kb_articles)} "
        f"({result.index.get('chunks', 0)} chunks)",
        f"- questions: {counts['answerable']} answerable, {counts['impossible']} unanswerable in corpus, "
        f"{counts['out_of_corpus']} out of corpus",
        f"- config: {', '.join(f'{k}={v}' for k, v in config.items())}",
        f"- machine: {host['platform']}, {host['cpus']} CPUs, load average {host['loadavg_start']} at the start, "
        f"{host['loadavg']} at the end",
        "",
        "| metric | value |",
        "|---|---|",
        f"| EM / F1 (all) | {summary['exact']:.2f} / {summary['f1']:.2f}{ci('f1', 1)} |",
        f"| HasAns EM / F1 | {summary['HasAns_exact']:.2f} / {summary['HasAns_f1']:.2f}{ci('HasAns_f1', 1)} |",
        f"| answerable: answer holds a gold answer | {pct(summary['HasAns_holds_gold'])}{ci('HasAns_holds_gold')} |",
        f"| NoAns EM / F1 | {summary['NoAns_exact']:.2f} / {summary['NoAns_f1']:.2f} |",
        f"| refusal rate, out of corpus | {pct(summary['refusal_rate_out_of_corpus'])}"
        f"{ci('refusal_rate_out_of_corpus')} (LLM calls: {summary['llm_calls_out_of_corpus']}) |",
        f"| false-refusal rate (answerable) | {pct(summary['false_refusal_rate'])}{ci('false_refusal_rate')} |",
        f"| hallucination rate (answered, should refuse) | {pct(summary['hallucination_rate'])}"
        f"{ci('hallucination_rate')} (in-corpus unanswerable: {pct(summary['hallucination_rate_impossible'])}) |",
        f"| citation precision | {pct(summary['citation_precision'])}{ci('citation_precision')} |",
        f"| attribution coverage | {pct(summary['attribution_coverage'])} |",
        f"| refusals by reason | {summary['refusals_by_reason']} |",
    ]
    if "official" in summary:
        off = summary["official"]
        lines.append(f"| official evaluate-v2.0.py | EM {off.get('exact', 0):.2f} / F1 {off.get('f1', 0):.2f} |")
    lines += ["", "| stage | P50 ms | P95 ms |", "|---|---|---|"]
    lines += [f"| {s} | {v['p50_ms']:.1f} | {v['p95_ms']:.1f} |" for s, v in summary["latency_ms"].items()]
    lines += ["", "![answers](answers.png)", "", "![latency](latency.png)", ""]
    return "\n".join(lines)
