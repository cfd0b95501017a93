"""Answering a question from the sources only: ``answer = f(retrieved chunks)``.

Order: retrieval (HyDE, hybrid search, gate, relevance, conflicts) → context →
generation → citation and grounding check → answer class → audit (QueryLog row,
runs.csv line, artifacts/<date>/<run_id>/retrieval.json). When the gate finds no
evidence, no LLM is called at all.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from foundry_site.core import llm, prompts
from foundry_site.core.text import TextRejected, user_text
from foundry_site.core.config import EXTRACTIVE
from generation import audit, reader
from generation.context import chunk_budget, context_build
from foundry_site.core.grounding import REFUSAL, Grounded, reply_text
from generation.live import SentenceGate
from foundry_site.core.grounding import Grounder
from generation.models import Conversation, QueryLog
from retrieval.services.gate import NO_EVIDENCE_ANSWER, NO_EVIDENCE_HINT
from retrieval.services.retrieve import Candidate, Retrieval, retrieve
from sources.models import Chunk, location_fields
from sources.selectors import index_version

logger = logging.getLogger(__name__)

MAX_QUESTION_CHARS = 4000
# Part of every answer-cache key: bump it when answering or grounding changes what a stored answer
# would be, so an upgraded install does not serve answers the old rules let through.
# 2: numbers are grounded next to the words around them (grounding.numbers_supported).
# 3: the extractive reader.
# 4: citations and "Passages found" give each kind's location (slide, sheet rows, section, OCR).
ANSWER_RULES = 4
LOW_CONFIDENCE_PREFIX = "Answer (LOW CONFIDENCE — limited source coverage):"
WITHHELD = (
    "No answer could be verified: the model's sentences were not supported by the passages found, "
    "so they were withheld. Read the passages, or ask again in other words."
)
BELOW_READER = (
    "No sentence of the passages found answers this closely enough to quote (best {best:.2f}, "
    "below the reader's threshold {threshold:.2f}). Read the passages, or ask again in other words."
)


class QueryError(ValueError):
    """The question itself is unusable (empty, too long)."""


class QueryFailed(Exception):
    """A model failed for good while answering; the failure is in the query log."""

    def __init__(self, message: str, *, run_id: str) -> None:
        super().__init__(message)
        self.run_id = run_id


@dataclass
class Answer:
    run_id: str
    question: str
    answer_class: str
    answer: str
    citations: list[dict] = field(default_factory=list)
    conflicts: list[dict] = field(default_factory=list)
    coverage: float | None = None
    refusal: str = ""  # gate | relevance | reader | grounding | model, when nothing was answered
    gate: dict = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    llm_calls: int = 0
    tokens: dict[str, int] = field(default_factory=dict)
    cost: float = 0.0
    model: str = ""
    mode: str = ""
    hyde_text: str = ""
    hint: str = ""
    cached: bool = False
    grounding: dict = field(default_factory=dict)  # audit only (QueryLog, artifacts): holds withheld text

    def as_dict(self) -> dict[str, Any]:
        """What the asker sees: every field but ``grounding``, whose model output may hold the
        unsupported sentences the check withheld."""
        return {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "grounding"}


def question_clean(question: str) -> str:
    """The question with NULs and runs of whitespace made single spaces; QueryError when unusable."""
    try:
        return user_text(question, what="question", max_chars=MAX_QUESTION_CHARS)
    except TextRejected as exc:
        raise QueryError(str(exc)) from None


Progress = Callable[[str], None]
# Told each verified piece of the answer as soon as it is verified: the pieces, joined, are the answer text.
Sentences = Callable[[str], None]


def _no_progress(stage: str) -> None:
    return None


@dataclass(frozen=True)
class Asked:
    """Who asked, in which scope and conversation: what a question's log row records beside its answer.

    ``message``: the asker's raw follow-up when the question answered is the standalone question made of it
    (generation/condense.py); it is logged beside the question and changes nothing else.
    ``conversation``: the Conversation the question is a turn of.
    """

    user: Any = None
    collection_ids: list[int] | None = None
    message: str = ""
    conversation: Conversation | None = None


def answer_question(
    *,
    question: str,
    user: Any = None,
    collection_ids: list[int] | None = None,
    mode: str | None = None,
    top_k: int | None = None,
    progress: Progress | None = None,
    message: str = "",
    conversation: Conversation | None = None,
    on_sentence: Sentences | None = None,
) -> Answer:
    """Answer from the sources or refuse; every call leaves exactly one QueryLog row (``answer_logged``).

    ``message`` and ``conversation`` are logged on the row (``Asked``).
    """
    asked = Asked(user=user, collection_ids=collection_ids, message=message, conversation=conversation)
    answer, _ = answer_logged(question, asked=asked, mode=mode, top_k=top_k, progress=progress, on_sentence=on_sentence)
    return answer


def answer_logged(
    question: str,
    *,
    asked: Asked,
    mode: str | None = None,
    top_k: int | None = None,
    progress: Progress | None = None,
    on_sentence: Sentences | None = None,
) -> tuple[Answer, QueryLog]:
    """Answer from the sources or refuse, and return the answer with its query-log row (the only one written).

    An identical question in the same scope, with the same configuration and an
    unchanged index, is answered from the log (marked ``cached``, no model call).
    ``progress`` is told each stage as it starts: retrieving, generating, checking.
    It never sees model output. ``on_sentence`` is given the answer's sentences (with their ``[S#]``
    markers and the white space between them), each once it has passed its check and before the row is
    written; refusals and failures send none. The returned ``Answer`` and its row are the same as without it.
    A model that fails for good is logged as a failed row and raised as ``QueryFailed``.
    """
    progress = progress or _no_progress
    question = question_clean(question)
    run_id = uuid.uuid4().hex
    started = time.perf_counter()
    key = cache_key(question, asked.collection_ids, mode, top_k)
    if settings.FOUNDRY.generation.cache_answers:
        cached = _from_cache(key, question=question, run_id=run_id, started=started, asked=asked)
        if cached is not None:
            if on_sentence is not None and cached[0].citations:
                for piece in answer_pieces(cached[0].answer):
                    on_sentence(piece)
            return cached
    with llm.record_calls() as calls:
        retrieval = None
        try:
            progress("retrieving")
            retrieval = retrieve(question=question, collection_ids=asked.collection_ids, mode=mode, top_k=top_k)
            answer = _answer_from(
                retrieval,
                run_id=run_id,
                model=settings.FOUNDRY.generation.model,
                progress=progress,
                on_sentence=on_sentence,
            )
        except llm.LLMError as exc:
            failed = _failed(run_id, question, mode, retrieval, calls, exc, started)
            answer_record(failed, asked=asked, channels=retrieval.channels_dict() if retrieval else {}, error=exc)
            logger.warning("query %s failed: %s", run_id, type(exc).__name__)
            raise QueryFailed(f"The model failed while answering: {exc}", run_id=run_id) from exc
    answer.timings["total"] = _elapsed_ms(started)
    answer.llm_calls = calls.llm_calls
    answer.tokens = {"prompt": calls.prompt_tokens, "completion": calls.completion_tokens}
    answer.cost = round(calls.cost, 6)
    row = answer_record(answer, asked=asked, channels=retrieval.channels_dict(), cache_key=key)
    audit.artifacts_write(
        run_id=answer.run_id,
        question=answer.question,
        retrieval=retrieval,
        answer={**answer.as_dict(), "grounding": answer.grounding},
    )
    return answer, row


def answer_pieces(text: str) -> list[str]:
    """``text`` cut after each ``[S#]`` marker group, each piece keeping the white space before the next:
    the pieces join to ``text``."""
    pieces = re.split(r"(?<=\])(\s+)(?!\[)", text)
    out = [pieces[i] + (pieces[i + 1] if i + 1 < len(pieces) else "") for i in range(0, len(pieces), 2)]
    return [p for p in out if p]


def cache_key(question: str, collection_ids: list[int] | None, mode: str | None, top_k: int | None) -> str:
    """Everything an answer depends on: question, scope, mode, configuration, the answer prompts'
    text (a template edited in place keeps its path), the answering rules and the index version."""
    scope = sorted(collection_ids) if collection_ids is not None else None
    material = json.dumps(
        [
            question.casefold(),
            scope,
            mode,
            top_k,
            settings.FOUNDRY.model_dump(mode="json"),
            prompts.render("answer_system"),
            prompts.render("answer_user"),
            ANSWER_RULES,
            index_version(scope),
        ],
        sort_keys=True,
    )
    return hashlib.sha256(material.encode("utf-8")).hexdigest()


def _from_cache(
    key: str, *, question: str, run_id: str, started: float, asked: Asked
) -> tuple[Answer, QueryLog] | None:
    """The answer logged under ``key`` (the newest that succeeded), logged again as this question's row;
    None when there is none, or a passage it cited is gone."""
    hit = QueryLog.objects.filter(cache_key=key, status=QueryLog.Status.OK).order_by("-created_at").first()
    if hit is None:
        return None
    texts = dict(Chunk.objects.filter(pk__in=[c["chunk_id"] for c in hit.citations]).values_list("pk", "text"))
    if len(texts) != len(hit.citations):
        return None
    answer = Answer(
        run_id=run_id,
        question=question,
        answer_class=hit.answer_class,
        answer=hit.answer,
        citations=[{**c, "text": texts[c["chunk_id"]]} for c in hit.citations],
        conflicts=hit.conflicts,
        coverage=hit.coverage,
        gate=hit.gate,
        model=hit.model,
        mode=hit.mode,
        hyde_text=hit.hyde_text,
        cached=True,
        tokens={"prompt": 0, "completion": 0},
        refusal=hit.refusal,
        hint=NO_EVIDENCE_HINT if hit.refusal == "gate" else "",
    )
    answer.timings = {"total": _elapsed_ms(started)}
    return answer, answer_record(answer, asked=asked, channels=hit.channels, cache_key=key)


def _answer_from(
    retrieval: Retrieval, *, run_id: str, model: str, progress: Progress, on_sentence: Sentences | None = None
) -> Answer:
    answer = Answer(
        run_id=run_id,
        question=retrieval.question,
        answer_class=QueryLog.AnswerClass.NO_EVIDENCE,
        answer=NO_EVIDENCE_ANSWER,
        gate=retrieval.gate.as_dict(),
        timings=retrieval.timings,
        mode=retrieval.mode,
        hyde_text=retrieval.hyde_text,
        conflicts=[c.as_dict() for c in retrieval.conflicts],
    )
    if not retrieval.gate.passed or not retrieval.candidates:
        answer.refusal = "gate" if not retrieval.gate.passed else "relevance"
        answer.hint = NO_EVIDENCE_HINT
        return answer
    answer.model = model
    if model == EXTRACTIVE:
        return _read(answer, retrieval, progress, on_sentence)
    request = prompts.render("answer_user", question=retrieval.question).strip()
    context, included = _context(retrieval, model, request)
    progress("generating")
    start = time.perf_counter()
    messages = [
        {"role": "system", "content": prompts.render("answer_system", context=context)},
        {"role": "user", "content": request},
    ]
    grounder = Grounder(included)
    gate = SentenceGate(grounder, on_sentence) if on_sentence is not None else None
    reply = llm.complete(
        messages=messages,
        purpose="answer",
        model=model,
        max_tokens=settings.FOUNDRY.generation.max_answer_tokens,
        temperature=settings.FOUNDRY.generation.temperature,
        on_text=gate.grow if gate else None,
    )
    answer.timings["generate"] = round((time.perf_counter() - start) * 1000, 1)
    progress("checking")
    start = time.perf_counter()
    grounded = grounder.ground(reply_text(reply, settings.FOUNDRY.generation.max_answer_tokens))
    answer.timings["grounding"] = round((time.perf_counter() - start) * 1000, 1)
    answer.grounding = grounded.audit(reply.text)
    answer = _classify(answer, grounded, included)
    if gate is not None and answer.citations:
        gate.finish(answer.answer)
    return answer


def _read(answer: Answer, retrieval: Retrieval, progress: Progress, on_sentence: Sentences | None = None) -> Answer:
    """The extractive reader's answer: the passages' best units quoted verbatim, or a refusal below its threshold."""
    conf = settings.FOUNDRY.generation
    progress("reading")
    start = time.perf_counter()
    included = retrieval.candidates[: conf.reader_passages]
    reading = reader.read(
        retrieval.question,
        [reader_passage(c, rank) for rank, c in enumerate(included, start=1)],
        embedding_model=settings.FOUNDRY.embedding.model,
        max_units=conf.reader_max_units,
    )
    answer.timings["read"] = round((time.perf_counter() - start) * 1000, 1)
    answer.grounding = reading.audit()
    if not reading.quotes or reading.best < conf.reader_min_score:
        answer.refusal = "reader"
        answer.answer = (
            BELOW_READER.format(best=reading.best, threshold=conf.reader_min_score)
            + f" Passages found: {passages_found(included)}."
        )
        return answer
    by_label = {c.label: c for c in included}
    answer.citations = [
        citation(by_label[label], quotes=[q for q in reading.quotes if q.passage.label == label])
        for label in dict.fromkeys(q.passage.label for q in reading.quotes)
    ]
    answer.coverage = 1.0  # every sentence is a verbatim quote of the passage it cites
    weak = max(c.score for c in included) < conf.low_confidence_score or reading.best < conf.reader_low_score
    answer.answer_class = QueryLog.AnswerClass.LOW_CONFIDENCE if weak else QueryLog.AnswerClass.NORMAL
    answer.answer = reading.text
    if on_sentence is not None:  # every quote is verbatim from its passage: verified as it is chosen
        for piece in answer_pieces(reading.text):
            on_sentence(piece)
    return answer


def reader_passage(candidate: Candidate, rank: int) -> reader.Passage:
    chunk = candidate.chunk
    return reader.Passage(
        candidate.label,
        chunk.text,
        chunk.line_start,
        chunk.line_end,
        chunk.page_start,
        chunk.page_end,
        rank=rank,
        source=chunk.source.name,
        ordinal=chunk.ordinal,
    )


def _context(retrieval: Retrieval, model: str, request: str) -> tuple[str, list[Candidate]]:
    conf = settings.FOUNDRY.generation
    overhead = llm.count_tokens(prompts.render("answer_system", context="") + request, model=model)
    budget = chunk_budget(model=model, configured=conf.token_budget, reserved=overhead + conf.max_answer_tokens)
    built = context_build(retrieval.candidates[: conf.max_passages], model=model, budget=budget)
    return built.text, built.included


def _classify(answer: Answer, grounded: Grounded, included: list[Candidate]) -> Answer:
    conf = settings.FOUNDRY.generation
    answer.coverage = grounded.coverage
    if grounded.refused or not grounded.text:
        answer.refusal = "model" if grounded.refused else "grounding"
        answer.answer = REFUSAL if grounded.refused else withheld_text(included)
        return answer
    by_label = {c.label: c for c in included}
    answer.citations = [citation(by_label[label]) for label in grounded.cited_ids]
    best = max(c.score for c in included)
    weak = best < conf.low_confidence_score or (grounded.coverage or 0.0) < conf.min_coverage
    answer.answer_class = QueryLog.AnswerClass.LOW_CONFIDENCE if weak else QueryLog.AnswerClass.NORMAL
    answer.answer = grounded.text
    return answer


def withheld_text(included: list[Candidate]) -> str:
    """The answer when grounding removed every sentence: the sources held passages, the model's
    reading of them was not supported, so say that (not "no information") and name the passages."""
    return f"{WITHHELD} Passages found: {passages_found(included)}."


def passages_found(included: list[Candidate]) -> str:
    return "; ".join(f"{c.label} {c.chunk.source.name}, {c.chunk.location}" for c in included)


def citation(candidate: Candidate, quotes: list[reader.Quote] | None = None) -> dict:
    """A cited passage; with ``quotes`` (the extractive reader's units of it) its lines are theirs, not the chunk's."""
    chunk = candidate.chunk
    lines = [chunk.line_start, chunk.line_end]
    if quotes:
        spans = [q.lines for q in quotes]
        lines = [min(first for first, _ in spans), max(last for _, last in spans)]
    return {
        "id": candidate.label,
        "chunk_id": chunk.pk,
        "source": chunk.source.name,
        "title": chunk.source.title,
        "heading": chunk.heading,
        "page": chunk.page_start,
        "lines": lines,
        **location_fields(chunk, lines),
        "score": round(candidate.score, 4),
        "text": chunk.text,
    }


def answer_record(
    answer: Answer, *, asked: Asked, channels: dict[str, Any], cache_key: str = "", error: Exception | None = None
) -> QueryLog:
    """Write the question's query-log row and its runs.csv line; returns the row.

    ``channels``: the chunk ids and scores each search channel found. ``cache_key``: what the answer may be
    served again under (``cache_key()``). ``error``: the model failure that ended the answer; the row is then
    logged as failed, with the error's text.
    """
    user = _user(asked.user)
    row = QueryLog.objects.record(
        run_id=answer.run_id,
        user=user,
        question=answer.question,
        message=asked.message,
        conversation=asked.conversation,
        mode=answer.mode,
        collection_ids=asked.collection_ids,
        hyde_text=answer.hyde_text,
        channels=channels,
        gate=answer.gate,
        answer_class=answer.answer_class,
        answer=answer.answer,
        citations=[{k: v for k, v in c.items() if k != "text"} for c in answer.citations],
        conflicts=answer.conflicts,
        coverage=answer.coverage,
        refusal=answer.refusal,
        prompt_tokens=answer.tokens.get("prompt", 0),
        completion_tokens=answer.tokens.get("completion", 0),
        cost=answer.cost,
        llm_calls=answer.llm_calls,
        model=answer.model,
        timings=answer.timings,
        grounding=answer.grounding,
        cached=answer.cached,
        cache_key=cache_key,
        status=QueryLog.Status.OK if error is None else QueryLog.Status.FAILED,
        error="" if error is None else str(error),
    )
    audit.runs_append(
        run_id=answer.run_id,
        task_name="rag_query",
        status="ok" if error is None else "failed",
        answer_class=answer.answer_class,
        llm_calls=answer.llm_calls,
        latency_ms=answer.timings["total"],
        model=answer.model,
        user=user,
    )
    return row


def _failed(
    run_id: str,
    question: str,
    mode: str | None,
    retrieval: Retrieval | None,
    calls: llm.CallRecord,
    exc: Exception,
    started: float,
) -> Answer:
    """What a question a model failed on leaves to log: what retrieval found, the calls made, the failing model."""
    return Answer(
        run_id=run_id,
        question=question,
        answer_class="",
        answer="",
        mode=mode or settings.FOUNDRY.retrieval.mode,
        gate=retrieval.gate.as_dict() if retrieval and retrieval.gate else {},
        timings={**(retrieval.timings if retrieval else {}), "total": _elapsed_ms(started)},
        llm_calls=calls.llm_calls,
        tokens={"prompt": calls.prompt_tokens, "completion": calls.completion_tokens},
        model=getattr(exc, "model", ""),
    )


def _elapsed_ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 1)


def _user(user: Any) -> Any:
    return user if getattr(user, "is_authenticated", False) else None
