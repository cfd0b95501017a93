"""``foundry eval answers``: SQuAD 2.0 questions through ``answer_question`` on a knowledge base
built from some of the articles.

Three kinds of question are asked: answerable ones of knowledge-base articles
(``answerable``), unanswerable ones of those articles (``impossible``: the
paragraph is there, the answer is not) and any question of an article left out
of the knowledge base (``out_of_corpus``: the gate should refuse with no LLM
call). For scoring, out-of-corpus questions count as unanswerable: from this
knowledge base the right answer is to abstain (""). The files a run leaves are
written by ``answers_report``.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.test.utils import override_settings

from foundry_site.evaluation import metrics, report
from foundry_site.evaluation.beir import Document, EvalDataError
from foundry_site.evaluation.index import EvalIndex, cache_key, eval_index
from sources.services.prepare import file_digest
from foundry_site.evaluation.squad import Article, Question, exact_match, f1_score, load_squad, normalize_answer
from generation.answers import answer_question
from sources.services.ingest import ProgressFn

KINDS = ("answerable", "impossible", "out_of_corpus")
_MARKERS = re.compile(r"\s*\[\s*S?\d+(?:\s*[,;]\s*S?\d+)*\s*\]")


@dataclass
class Outcome:
    qid: str
    kind: str
    question: str
    golds: list[str]
    prediction: str  # "" = abstained
    answer_class: str
    refusal: str
    llm_calls: int
    coverage: float | None
    gate_max_score: float
    citations: list[dict]  # {chunk_id, source, supports}: supports = the chunk contains a gold answer
    timings: dict[str, float]
    em: float = 0.0
    f1: float = 0.0
    holds_gold: bool = False  # answerable: the answer contains a gold answer (both normalised as the scorer does)

    @property
    def abstained(self) -> bool:
        return self.prediction == ""


@dataclass
class AnswersEvaluation:
    dataset: dict
    kb_articles: list[str]
    outcomes: list[Outcome] = field(default_factory=list)
    index: dict = field(default_factory=dict)
    load_start: list[float] = field(default_factory=list)  # load average when the run started

    def predictions(self) -> dict[str, str]:
        return {o.qid: o.prediction for o in self.outcomes}

    def summary(self) -> dict:
        return answers_summary(self.outcomes)


def sample(
    articles: list[Article], *, kb_articles: int, limit: int, seed: int
) -> tuple[list[Article], dict[str, list[Question]]]:
    """Pick the knowledge-base articles and up to ``limit`` questions, split evenly over the kinds."""
    if not 1 <= kb_articles < len(articles):
        raise EvalDataError(
            f"--kb-articles must be between 1 and {len(articles) - 1} "
            f"(the file has {len(articles)} articles; at least one must stay out of the corpus)"
        )
    if limit < 3:
        raise ValueError("--limit must be at least 3 (one question of each kind)")
    rng = random.Random(seed)
    kb = rng.sample(articles, kb_articles)
    outside = [a for a in articles if a not in kb]
    pools = {
        "answerable": [q for a in kb for q in a.questions if not q.impossible],
        "impossible": [q for a in kb for q in a.questions if q.impossible],
        "out_of_corpus": [q for a in outside for q in a.questions],
    }
    share = {kind: limit // 3 + (1 if i < limit % 3 else 0) for i, kind in enumerate(KINDS)}
    return kb, {kind: rng.sample(pool, min(share[kind], len(pool))) for kind, pool in pools.items()}


def article_document(article: Article) -> Document:
    return Document(article.title, article.title.replace("_", " "), "\n\n".join(article.paragraphs))


def prediction_text(answer_text: str) -> str:
    """The answer as the scorer should see it: citation markers removed."""
    return " ".join(_MARKERS.sub("", answer_text).split())


@contextmanager
def squad_index(
    squad: Path, kb: list[Article], *, digest: str | None = None, progress: ProgressFn | None = None
) -> Iterator[EvalIndex]:
    """The cached knowledge base of ``kb``'s articles (keyed by the file and the article titles)."""
    key = cache_key(data_sha256=digest or file_digest(squad), extra={"articles": sorted(a.title for a in kb)})
    with eval_index(
        name=f"squad-{squad.stem}", key=key, documents=[article_document(a) for a in kb], progress=progress
    ) as index:
        yield index


def answers_evaluate(
    *,
    squad: Path,
    kb_articles: int,
    limit: int,
    seed: int,
    ingest_progress: ProgressFn | None = None,
    question_progress: Callable[[Outcome], None] | None = None,
) -> AnswersEvaluation:
    """Build (or reuse) the knowledge base, ask every sampled question, score each answer."""

    load_start = report.machine()["loadavg"]
    articles = load_squad(squad)
    kb, questions = sample(articles, kb_articles=kb_articles, limit=limit, seed=seed)
    digest = file_digest(squad)
    titles = sorted(a.title for a in kb)
    result = AnswersEvaluation(
        dataset={"squad": str(squad), "sha256": digest, "articles": len(articles), "seed": seed, "limit": limit},
        kb_articles=titles,
        load_start=load_start,
    )
    with squad_index(squad, kb, digest=digest, progress=ingest_progress) as index:
        counts = index.ingest.as_dict()
        result.index = {
            "folder": str(index.folder),
            "chunks": len(index.doc_of_chunk),
            **{k: counts[k] for k in ("ingested", "unchanged", "failed", "skipped")},
        }
        runs = index.folder / "runs"
        # Per-question audit rows (runs.csv, retrieval.json) stay with the eval index, not the user's home,
        # and the answer cache is off: a second run must measure the pipeline, not replay the log.
        fresh = settings.FOUNDRY.with_overrides(generation={"cache_answers": False})
        with override_settings(FOUNDRY_HOME=runs, FOUNDRY_ARTIFACTS=runs / "artifacts", FOUNDRY=fresh):
            for kind in KINDS:
                for question in questions[kind]:
                    outcome = question_ask(question, kind)
                    result.outcomes.append(outcome)
                    if question_progress:
                        question_progress(outcome)
    return result


def question_ask(question: Question, kind: str) -> Outcome:
    answer = answer_question(question=question.question)
    refused = answer.answer_class == "no_evidence"
    golds = list(question.answers) if kind == "answerable" else []
    prediction = "" if refused else prediction_text(answer.answer)
    gold_norm = [normalize_answer(g) for g in question.answers if normalize_answer(g)]
    citations = [
        {
            "chunk_id": c["chunk_id"],
            "source": c["source"],
            "supports": any(g in normalize_answer(c["text"]) for g in gold_norm),
        }
        for c in answer.citations
    ]
    return Outcome(
        qid=question.qid,
        kind=kind,
        question=question.question,
        golds=golds,
        prediction=prediction,
        answer_class=answer.answer_class,
        refusal=answer.refusal,
        llm_calls=answer.llm_calls,
        coverage=answer.coverage,
        gate_max_score=float(answer.gate.get("max_score", 0.0)),
        citations=citations,
        timings=dict(answer.timings),
        em=exact_match(prediction, golds),
        f1=f1_score(prediction, golds),
        holds_gold=holds_gold(prediction, golds),
    )


def holds_gold(prediction: str, golds: list[str]) -> bool:
    """Whether ``prediction`` contains one of ``golds``, both normalised as the official scorer does
    (lower case, no punctuation or articles): the measure of an answer that quotes a sentence."""
    said = f" {normalize_answer(prediction)} "
    return bool(prediction) and any(f" {g} " in said for g in map(normalize_answer, golds) if g)


def _rate(hits: int, total: int) -> float | None:
    return round(hits / total, 4) if total else None


def answers_summary(outcomes: list[Outcome]) -> dict:
    """Every headline number of the answers report, from the per-question outcomes."""
    by_kind = {kind: [o for o in outcomes if o.kind == kind] for kind in KINDS}
    has_ans = by_kind["answerable"]
    no_ans = by_kind["impossible"] + by_kind["out_of_corpus"]
    answered = [o for o in outcomes if not o.abstained]
    judged = [c for o in has_ans if not o.abstained for c in o.citations]
    ooc = by_kind["out_of_corpus"]
    stages = sorted({s for o in outcomes for s in o.timings})
    return {
        "questions": len(outcomes),
        "counts": {k: len(v) for k, v in by_kind.items()},
        "exact": round(100 * metrics.mean([o.em for o in outcomes]), 2),
        "f1": round(100 * metrics.mean([o.f1 for o in outcomes]), 2),
        "HasAns_exact": round(100 * metrics.mean([o.em for o in has_ans]), 2),
        "HasAns_f1": round(100 * metrics.mean([o.f1 for o in has_ans]), 2),
        "HasAns_holds_gold": _rate(sum(o.holds_gold for o in has_ans), len(has_ans)),
        "llm_calls": sum(o.llm_calls for o in outcomes),
        "NoAns_exact": round(100 * metrics.mean([o.em for o in no_ans]), 2),
        "NoAns_f1": round(100 * metrics.mean([o.f1 for o in no_ans]), 2),
        "refusal_rate_out_of_corpus": _rate(sum(o.abstained for o in ooc), len(ooc)),
        "llm_calls_out_of_corpus": sum(o.llm_calls for o in ooc),
        "refused_without_llm_out_of_corpus": _rate(sum(o.abstained and o.llm_calls == 0 for o in ooc), len(ooc)),
        "false_refusal_rate": _rate(sum(o.abstained for o in has_ans), len(has_ans)),
        "hallucination_rate": _rate(sum(not o.abstained for o in no_ans), len(no_ans)),
        "hallucination_rate_impossible": _rate(
            sum(not o.abstained for o in by_kind["impossible"]), len(by_kind["impossible"])
        ),
        "citation_precision": _rate(sum(c["supports"] for c in judged), len(judged)),
        "attribution_coverage": round(metrics.mean([o.coverage for o in answered if o.coverage is not None]), 4)
        if answered
        else None,
        "refusals_by_reason": {
            r: sum(o.refusal == r for o in outcomes) for r in sorted({o.refusal for o in outcomes if o.refusal})
        },
        "latency_ms": {s: metrics.latency_summary([o.timings[s] for o in outcomes if s in o.timings]) for s in stages},
        # 95 % intervals: bootstrap for the mean F1, Wilson for the rates (a few dozen questions a kind)
        "ci95": {
            "f1": metrics.rounded(metrics.mean_interval([o.f1 for o in outcomes]), 100),
            "HasAns_f1": metrics.rounded(metrics.mean_interval([o.f1 for o in has_ans]), 100),
            "HasAns_holds_gold": metrics.rounded(
                metrics.proportion_interval(sum(o.holds_gold for o in has_ans), len(has_ans))
            ),
            "refusal_rate_out_of_corpus": metrics.rounded(
                metrics.proportion_interval(sum(o.abstained for o in ooc), len(ooc))
            ),
            "false_refusal_rate": metrics.rounded(
                metrics.proportion_interval(sum(o.abstained for o in has_ans), len(has_ans))
            ),
            "hallucination_rate": metrics.rounded(
                metrics.proportion_interval(sum(not o.abstained for o in no_ans), len(no_ans))
            ),
            "citation_precision": metrics.rounded(
                metrics.proportion_interval(sum(c["supports"] for c in judged), len(judged))
            ),
        },
    }
