"""``foundry eval retrieval`` (BEIR) and ``foundry eval answers`` (SQuAD 2.0)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TextIO

from django.conf import settings
from tqdm import tqdm

from foundry_site.evaluation import metrics, report
from foundry_site.evaluation.retrieval_run import EVAL_TOP_K, modes_parse, retrieval_evaluate, retrieval_report
from sources.services.ingest import FileResult


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("eval", help="measure retrieval (BEIR) or answers (SQuAD 2.0) and write a report")
    kinds = p.add_subparsers(dest="eval_kind", required=True, metavar="KIND")
    r = kinds.add_parser("retrieval", help="nDCG@10, Recall@10/100, MRR@10 and latency per mode on BEIR data")
    r.add_argument("--corpus", type=Path, required=True, help="BEIR corpus.jsonl")
    r.add_argument("--queries", type=Path, required=True, help="BEIR queries.jsonl")
    r.add_argument("--qrels", type=Path, required=True, help="BEIR qrels .tsv (query-id, corpus-id, score)")
    r.add_argument("--modes", default="bm25,dense,hybrid", help="comma-separated: bm25,dense,hybrid")
    r.add_argument("--json", action="store_true", help="print one JSON summary")
    r.add_argument("--report", type=Path, default=None, help="report folder (default: under artifacts/eval/)")
    r.set_defaults(handler=retrieval_command)

    a = kinds.add_parser("answers", help="EM/F1, refusals, citations and latency on SQuAD 2.0 data")
    a.add_argument("--squad", type=Path, required=True, help="SQuAD 2.0 JSON (e.g. dev-v2.0.json)")
    a.add_argument("--kb-articles", type=int, default=5, help="articles that form the knowledge base")
    a.add_argument("--limit", type=int, default=60, help="questions asked, split across the three kinds")
    a.add_argument("--seed", type=int, default=0, help="seed of the article and question sample")
    a.add_argument(
        "--reader",
        default=None,
        help="comma-separated generation.model values to compare on the same questions, e.g. "
        "extractive,local/smollm2-135m (default: the configured one)",
    )
    a.add_argument(
        "--official-scorer", type=Path, default=None, help="also score with the official evaluate-v2.0.py at this path"
    )
    a.add_argument("--json", action="store_true", help="print one JSON summary")
    a.add_argument("--report", type=Path, default=None, help="report folder (default: under artifacts/eval/)")
    a.set_defaults(handler=answers_command)


class Progress:
    """tqdm bars on stderr for the index build and the queries; silent with --json."""

    def __init__(self, *, quiet: bool) -> None:
        self.quiet = quiet
        self.bars: dict[str, tqdm] = {}

    def bar(self, name: str, total: int | None = None) -> tqdm:
        if name not in self.bars:
            self.bars[name] = tqdm(
                total=total,
                desc=name,
                unit="q" if name != "index" else "file",
                file=sys.stderr,
                disable=self.quiet or None,
                dynamic_ncols=True,
            )
        return self.bars[name]

    def step(self, name: str) -> None:
        self.bar(name).update(1)

    def ingest(self, result: FileResult) -> None:
        if result.status != "removed":
            self.bar("index").update(1)

    def close(self) -> None:
        for bar in self.bars.values():
            bar.close()


def retrieval_command(opts: argparse.Namespace, out: TextIO) -> int:
    modes = modes_parse(opts.modes)
    report.report_folder_check(opts.report)
    progress = Progress(quiet=opts.json)
    try:
        result = retrieval_evaluate(
            corpus=opts.corpus,
            queries=opts.queries,
            qrels=opts.qrels,
            modes=modes,
            ingest_progress=progress.ingest,
            query_progress=progress.step,  # one bar per mode
        )
    finally:
        progress.close()
    eval_id = report.eval_id_new()
    folder = report.report_folder("retrieval", eval_id, opts.report)
    conf = settings.FOUNDRY
    # every setting the numbers depend on, so a report says what it measured
    config = {
        **conf.retrieval.model_dump(mode="json"),
        "top_k": EVAL_TOP_K,
        "embedding": conf.embedding.model,
        "context_model": conf.embedding.context_model,
        "chunk_tokens": conf.ingest.chunk_tokens,
        "chunk_overlap_tokens": conf.ingest.chunk_overlap_tokens,
        "window_sentences": conf.ingest.window_sentences,
    }
    retrieval_report(result, folder=folder, eval_id=eval_id, config=config)
    summary = result.as_dict()
    if opts.json:
        out.write(json.dumps({**summary, "report": str(folder)}) + "\n")
        return 0
    out.write(f"Retrieval evaluation on {result.queries} queries ({result.index['chunks']} chunks)\n\n")
    out.write(
        f"  {'mode':<8} {'nDCG@10':>8} {'95 % interval':>17} {'R@10':>7} {'R@100':>7} {'MRR@10':>7} "
        f"{'P50 ms':>8} {'P95 ms':>8}\n"
    )
    for mode, s in summary["modes"].items():
        out.write(
            f"  {mode:<8} {s['ndcg@10']:>8.4f} {metrics.span(s['ndcg@10_ci95']):>17} {s['recall@10']:>7.4f} "
            f"{s['recall@100']:>7.4f} {s['mrr@10']:>7.4f} {s['p50_ms']:>8.1f} {s['p95_ms']:>8.1f}\n"
        )
    if summary["differences"]:
        out.write("\n  nDCG@10 differences, query by query (an interval holding 0 is within chance):\n")
        for pair, d in summary["differences"].items():
            out.write(f"  {pair:<17} {d['ndcg@10']:>+8.4f} {metrics.span(d['ci95']):>17}\n")
    out.write(f"\nReport: {folder}/report.md\n")
    return 0


def answers_command(opts: argparse.Namespace, out: TextIO) -> int:
    from django.core.exceptions import ImproperlyConfigured
    from django.test.utils import override_settings

    from core import llm

    report.report_folder_check(opts.report)
    readers = [r.strip() for r in (opts.reader or settings.FOUNDRY.generation.model).split(",") if r.strip()]
    configs = {}
    for name in readers:
        try:
            configs[name] = settings.FOUNDRY.with_overrides(generation={"model": name})
        except ValueError as exc:
            raise ImproperlyConfigured(f"--reader {name!r}: {exc}") from None
        problems = llm.validate_models(configs[name].llm_models() & {name}, role="chat")
        if problems:
            raise ImproperlyConfigured(f"--reader {name!r}: {'; '.join(problems)}")
    summaries: dict[str, dict] = {}
    for name, conf in configs.items():
        with override_settings(FOUNDRY=conf):
            summaries[name] = _answers_one(opts, out, report_folder=_reader_folder(opts.report, name, len(configs)))
    if len(summaries) > 1:
        out.write(readers_table(summaries) if not opts.json else json.dumps({"readers": summaries}) + "\n")
    return 0


def _reader_folder(folder: Path | None, reader: str, readers: int) -> Path | None:
    if folder is None or readers == 1:
        return folder
    return folder / reader.replace("/", "_")


def _answers_one(opts: argparse.Namespace, out: TextIO, *, report_folder: Path | None) -> dict:
    from foundry_site.evaluation.answers import answers_evaluate
    from foundry_site.evaluation.answers_report import answers_report
    from foundry_site.evaluation.squad import load_squad

    progress = Progress(quiet=opts.json)
    try:
        result = answers_evaluate(
            squad=opts.squad,
            kb_articles=opts.kb_articles,
            limit=opts.limit,
            seed=opts.seed,
            ingest_progress=progress.ingest,
            question_progress=lambda outcome: progress.step("questions"),
        )
    finally:
        progress.close()
    eval_id = report.eval_id_new()
    folder = report.report_folder("answers", eval_id, report_folder)
    summary = answers_report(
        result, articles=load_squad(opts.squad), folder=folder, eval_id=eval_id, official_scorer=opts.official_scorer
    )
    if opts.json:
        out.write(json.dumps({**summary, "reader": settings.FOUNDRY.generation.model, "report": str(folder)}) + "\n")
    else:
        out.write((folder / "report.md").read_text(encoding="utf-8").split("![")[0])
        out.write(f"Report: {folder}/report.md\n")
    return {**summary, "report": str(folder)}


READER_COLUMNS = (
    ("holds gold (answerable)", "HasAns_holds_gold"),
    ("HasAns F1", "HasAns_f1"),
    ("refused, out of corpus", "refusal_rate_out_of_corpus"),
    ("answered, unanswerable in corpus", "hallucination_rate_impossible"),
    ("LLM calls", "llm_calls"),
)


def readers_table(summaries: dict[str, dict]) -> str:
    """One row per reader: the headline numbers side by side."""
    lines = [
        "",
        "| reader | " + " | ".join(title for title, _ in READER_COLUMNS) + " | P95 total ms |",
        "|---" * (len(READER_COLUMNS) + 2) + "|",
    ]
    for name, s in summaries.items():
        cells = [_cell(s.get(key), key) for _, key in READER_COLUMNS]
        p95 = s.get("latency_ms", {}).get("total", {}).get("p95_ms")
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {p95 if p95 is not None else 'n/a'} |")
    return "\n".join(lines) + "\n"


def _cell(value: float | int | None, key: str) -> str:
    if value is None:
        return "n/a"
    if key in ("HasAns_f1", "llm_calls"):
        return f"{value:g}"
    return f"{100 * value:.1f}%"
