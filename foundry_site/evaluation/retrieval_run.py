"""``foundry eval retrieval``: BEIR data through the same ``retrieve()`` as ``foundry query``.

Retrieval only (no generation). Each query asks for EVAL_TOP_K chunks; a
document ranks where its best chunk ranks, so "@100" counts the distinct
documents among the first 100 chunks. Ranks are read before the gate, which
decides whether to answer, not how to rank.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from foundry_site.evaluation import metrics, report
from foundry_site.evaluation.beir import judged_queries, load_corpus, load_qrels, load_queries
from foundry_site.evaluation.index import EvalIndex, cache_key, eval_index
from sources.services.prepare import file_digest
from retrieval.services.retrieve import retrieve
from sources.services.ingest import ProgressFn

EVAL_TOP_K = 100
MODES = ("bm25", "dense", "hybrid")
METRIC_KEYS = ("ndcg@10", "recall@10", "recall@100", "mrr@10")

QueryProgress = Callable[[str], None]  # called with the mode after each query


@dataclass
class ModeResult:
    mode: str
    per_query: dict[str, dict[str, float]] = field(default_factory=dict)
    latencies_ms: list[float] = field(default_factory=list)

    def scores(self, key: str) -> list[float]:
        return [m[key] for m in self.per_query.values()]

    def summary(self) -> dict:
        out: dict = {key: round(metrics.mean(self.scores(key)), 4) for key in METRIC_KEYS}
        out["ndcg@10_ci95"] = metrics.rounded(metrics.mean_interval(self.scores("ndcg@10")))
        return {**out, **metrics.latency_summary(self.latencies_ms)}


@dataclass
class RetrievalEvaluation:
    dataset: dict
    index: dict
    modes: dict[str, ModeResult] = field(default_factory=dict)
    queries: int = 0
    load_start: list[float] = field(default_factory=list)  # load average when the run started

    def as_dict(self) -> dict:
        return {
            "modes": {name: r.summary() for name, r in self.modes.items()},
            "queries": self.queries,
            "differences": self.differences(),
        }

    def differences(self) -> dict[str, dict]:
        """nDCG@10 of each later mode minus each earlier one, query by query, with a paired 95 % interval:
        whether one mode ranks better than another on these queries, or the gap is within chance."""
        out = {}
        names = list(self.modes)
        for i, earlier in enumerate(names):
            for later in names[i + 1 :]:
                pairs = zip(self.modes[later].scores("ndcg@10"), self.modes[earlier].scores("ndcg@10"), strict=True)
                gaps = [a - b for a, b in pairs]
                out[f"{later} - {earlier}"] = {
                    "ndcg@10": round(metrics.mean(gaps), 4),
                    "ci95": metrics.rounded(metrics.mean_interval(gaps)),
                }
        return out


def modes_parse(text: str) -> list[str]:
    modes = [m.strip() for m in text.split(",") if m.strip()]
    unknown = [m for m in modes if m not in MODES]
    if unknown or not modes:
        raise ValueError(f"unknown mode(s) {', '.join(unknown) or '(none)'}; choose from {', '.join(MODES)}")
    return list(dict.fromkeys(modes))


def retrieval_evaluate(
    *,
    corpus: Path,
    queries: Path,
    qrels: Path,
    modes: Sequence[str],
    ingest_progress: ProgressFn | None = None,
    query_progress: QueryProgress | None = None,
) -> RetrievalEvaluation:
    """Score every judged query in every mode. Files are checked before anything is ingested."""
    load_start = report.machine()["loadavg"]
    documents = load_corpus(corpus)
    relevance = load_qrels(qrels)
    judged = judged_queries(load_queries(queries), relevance, documents, qrels_path=qrels)
    if not judged:
        raise ValueError(f"{qrels}: no judged query is in {queries}")
    digest = file_digest(corpus)
    dataset = {
        "corpus": str(corpus),
        "corpus_sha256": digest,
        "documents": len(documents),
        "queries_file": str(queries),
        "qrels_file": str(qrels),
    }
    with eval_index(
        name=f"beir-{corpus.parent.name or 'corpus'}",
        key=cache_key(data_sha256=digest),
        documents=documents.values(),
        progress=ingest_progress,
    ) as index:
        result = RetrievalEvaluation(
            dataset=dataset, index=index_summary(index), queries=len(judged), load_start=load_start
        )
        for mode in modes:
            result.modes[mode] = mode_evaluate(mode, judged, relevance, index, query_progress)
    return result


def index_summary(index: EvalIndex) -> dict:
    counts = index.ingest.as_dict()
    return {
        "folder": str(index.folder),
        "database": str(index.database),
        "chunks": len(index.doc_of_chunk),
        **{k: counts[k] for k in ("ingested", "unchanged", "failed", "skipped")},
    }


def mode_evaluate(
    mode: str,
    judged: dict[str, str],
    relevance: dict[str, dict[str, int]],
    index: EvalIndex,
    progress: QueryProgress | None,
) -> ModeResult:
    result = ModeResult(mode)
    retrieve(question=next(iter(judged.values())), collection_ids=None, mode=mode, top_k=EVAL_TOP_K)  # warm-up
    for query_id, text in judged.items():
        start = time.perf_counter()
        found = retrieve(question=text, collection_ids=None, mode=mode, top_k=EVAL_TOP_K)
        result.latencies_ms.append((time.perf_counter() - start) * 1000)
        ranked = metrics.dedupe(
            [index.doc_of_chunk[c.chunk.pk] for c in found.ranked if c.chunk.pk in index.doc_of_chunk]
        )
        result.per_query[query_id] = metrics.ranking_metrics(ranked, relevance[query_id])
        if progress:
            progress(mode)
    return result


def retrieval_report(result: RetrievalEvaluation, *, folder: Path, eval_id: str, config: dict) -> dict[str, str]:
    """Write report.md / report.json / plots into ``folder`` and append the eval.csv row."""
    host = {**report.machine(), "loadavg_start": result.load_start}
    summary = result.as_dict()
    folder.mkdir(parents=True, exist_ok=True)
    files = {
        "bars": report.bars_plot(
            folder / "modes.png",
            title=f"Retrieval quality ({result.queries} queries)",
            groups={m: {k: s[k] for k in METRIC_KEYS} for m, s in summary["modes"].items()},
        ),
        "latency": report.latency_plot(
            folder / "latency.png",
            title="Retrieval latency per query",
            series={m: r.latencies_ms for m, r in result.modes.items()},
        ),
    }
    payload = {
        "eval_id": eval_id,
        "kind": "retrieval",
        **summary,
        "dataset": result.dataset,
        "index": result.index,
        "config": config,
        "machine": host,
        "per_query": {m: r.per_query for m, r in result.modes.items()},
        "latencies_ms": {m: [round(x, 2) for x in r.latencies_ms] for m, r in result.modes.items()},
    }
    lines = [
        f"# Retrieval evaluation {eval_id}",
        "",
        f"- corpus: `{result.dataset['corpus']}` ({result.dataset['documents']} documents, "
        f"sha256 {result.dataset['corpus_sha256'][:12]})",
        f"- queries: {result.queries} judged, from `{result.dataset['queries_file']}` / "
        f"`{result.dataset['qrels_file']}`",
        f"- index: {result.index['chunks']} chunks in `{result.index['database']}` "
        f"(ingested {result.index['ingested']}, unchanged {result.index['unchanged']}, "
        f"failed {result.index['failed']})",
        f"- config: {', '.join(f'{k}={v}' for k, v in config.items())}",
        f"- machine: {host['platform']}, {host['cpus']} CPUs, load average {host['loadavg_start']} at the start, "
        f"{host['loadavg']} at the end",
        "",
        "| mode | nDCG@10 | 95 % interval | Recall@10 | Recall@100 | MRR@10 | P50 ms | P95 ms |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for mode, s in summary["modes"].items():
        lines.append(
            f"| {mode} | {s['ndcg@10']:.4f} | {metrics.span(s['ndcg@10_ci95'])} | {s['recall@10']:.4f} | "
            f"{s['recall@100']:.4f} | {s['mrr@10']:.4f} | {s['p50_ms']:.1f} | {s['p95_ms']:.1f} |"
        )
    if summary["differences"]:
        lines += [
            "",
            "Paired differences in nDCG@10 (query by query; an interval holding 0 is within chance):",
            "",
            "| modes | difference | 95 % interval |",
            "|---|---|---|",
        ]
        lines += [
            f"| {pair} | {d['ndcg@10']:+.4f} | {metrics.span(d['ci95'])} |"
            for pair, d in summary["differences"].items()
        ]
    lines += ["", "![quality per mode](modes.png)", "", "![latency](latency.png)", ""]
    files.update(report.report_write(folder, payload=payload, markdown="\n".join(lines)))
    best = max(summary["modes"].items(), key=lambda item: item[1]["ndcg@10"])
    report.eval_csv_append(
        eval_id=eval_id,
        kind="retrieval",
        dataset=result.dataset["corpus"],
        dataset_sha256=result.dataset["corpus_sha256"],
        questions=result.queries,
        modes=",".join(summary["modes"]),
        headline=f"ndcg@10 ({best[0]})",
        headline_value=best[1]["ndcg@10"],
        metrics=summary["modes"],
        report=str(folder),
    )
    return files
