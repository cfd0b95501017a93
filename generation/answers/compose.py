"""From the passages retrieval found to an answer: the extractive reader's quotes, or the model's reply
kept only where the grounding check finds each sentence in a cited passage. When the gate found no
evidence, no model is called at all.
"""

from __future__ import annotations

import time

from django.conf import settings
from django.utils.translation import gettext, gettext_noop

from core import llm, prompts
from core.config import EXTRACTIVE
from core.grounding import REFUSAL, Grounded, Grounder, reply_text
from generation import answerability, reader
from generation.answers.answer import Answer, Progress, Sentences, answer_pieces
from generation.answers.labels import answer_relabel, streamed
from generation.answers.language import answering_in
from generation.context import chunk_budget, context_build
from generation.live import SentenceGate
from generation.models import QueryLog
from retrieval.services.conflicts import conflicts_concerning
from retrieval.services.gate import NO_EVIDENCE_ANSWER, NO_EVIDENCE_HINT
from retrieval.services.retrieve import Candidate, Retrieval
from sources.models import location_fields

# The refusals' words, translated where an answer is composed: into its question's language (``answering_in``).
WITHHELD = gettext_noop(
    "No answer could be verified: the model's sentences were not supported by the passages found, "
    "so they were withheld. Read the passages, or ask again in other words."
)
UNMENTIONED = gettext_noop(
    "The passages found do not mention {names}, so they cannot answer this. Read the passages, "
    "or ask again in other words."
)
# The scores behind this (the best sentence's and the reader's threshold) are the audit record's
# (``grounding``: ``best``, ``threshold``), not the asker's: they mean nothing to someone reading an answer.
BELOW_READER = gettext_noop(
    "The passages found are about this, but none of their sentences answers the question closely "
    "enough to quote as the answer. Read the passages, or ask again in other words."
)
# Introduces the list of passages a refusal names; ``generation.present`` finds it in every language.
PASSAGES_FOUND = gettext_noop("Passages found:")


def answer_compose(
    retrieval: Retrieval,
    *,
    run_id: str,
    model: str,
    progress: Progress,
    on_sentence: Sentences | None = None,
    message: str = "",
) -> Answer:
    """The answer ``model`` gives from what ``retrieval`` found, or the refusal and its reason.

    Calls no model when the gate found no evidence or ``model`` is the extractive reader; usage, cost and the
    total time are the caller's to fill in. ``on_sentence`` as in ``answer_logged``. ``message``: the follow-up
    as typed when the question was made standalone from it (the names the asker used are the message's; the
    extractive reader reads the passages its earlier turn quoted too, ``followed``, and ranks their units higher).
    The answer carries the conflicts between the passages found that concern it (``conflicts_concerning``). Its
    labels run S1…Sn in reading order (``answer_relabel``; the pieces streamed to ``on_sentence`` alike).
    A refusal's text and hint are in the question's language (``answering_in``), whatever the interface's.
    """
    send, _ = streamed(on_sentence)
    with answering_in(message or retrieval.question):
        answer = _compose(
            retrieval,
            run_id=run_id,
            model=model,
            progress=progress,
            on_sentence=send,
            message=message,
        )
    answer.conflicts = conflicts_concerning(
        answer.conflicts,
        question=message or retrieval.question,
        answer=answer.answer,
        cited={c["id"] for c in answer.citations},
    )
    return answer_relabel(answer)


def _compose(
    retrieval: Retrieval,
    *,
    run_id: str,
    model: str,
    progress: Progress,
    on_sentence: Sentences | None,
    message: str,
) -> Answer:
    answer = Answer(
        run_id=run_id,
        question=retrieval.question,
        answer_class=QueryLog.AnswerClass.NO_EVIDENCE,
        answer=gettext(NO_EVIDENCE_ANSWER),
        gate=retrieval.gate.as_dict(),
        timings=retrieval.timings,
        mode=retrieval.mode,
        hyde_text=retrieval.hyde_text,
        conflicts=[c.as_dict() for c in retrieval.conflicts],
    )
    if not retrieval.gate.passed or not retrieval.candidates:
        answer.refusal = "gate" if not retrieval.gate.passed else "relevance"
        answer.hint = gettext(NO_EVIDENCE_HINT)
        return answer
    answer.model = model
    if model == EXTRACTIVE:
        return _read(answer, retrieval, progress, on_sentence, message=message)
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


def reading_of(
    retrieval: Retrieval, *, message: str = ""
) -> tuple[list[Candidate], list[reader.Passage], reader.Reading]:
    """The passages the extractive reader reads for ``retrieval`` and its reading of them: the passages found best
    (more for a follow-up: a question made of one finds its answer further down), and those the turn a follow-up
    came from was answered from (``retrieve``'s ``quoted``)."""
    conf = settings.FOUNDRY.generation
    # A question naming a version is about it, and the search finds every version's notes alike: the passages that
    # open with it are read first, then those naming it ("When was 2.4.1 released?" reads 2.4.1's notes, not 2.4.0's).
    versions = reader.versions(retrieval.question)
    ordered = sorted(retrieval.candidates, key=lambda c: reader.version_order(versions, c.chunk.under, c.text))
    read = conf.reader_followup_passages if message else conf.reader_passages
    included = [c for i, c in enumerate(ordered) if i < read or c.followed]
    passages = [reader_passage(c, rank) for rank, c in enumerate(included, start=1)]
    reading = reader.read(
        retrieval.question,
        passages,
        embedding_model=settings.FOUNDRY.embedding.model,
        max_units=conf.reader_max_units,
        typed=message,
        quoted=retrieval.quoted,
        near=frozenset(c.label for c in included if c.followed),
    )
    return included, passages, reading


def _read(
    answer: Answer,
    retrieval: Retrieval,
    progress: Progress,
    on_sentence: Sentences | None = None,
    *,
    message: str = "",
) -> Answer:
    """The extractive reader's answer: the passages' best units quoted verbatim; a refusal when the passages
    never name a code or name the asker used, or the answerability model finds the reading unlikely to answer."""
    conf = settings.FOUNDRY.generation
    progress("reading")
    start = time.perf_counter()
    model = answerability.model_for(settings.FOUNDRY.embedding.model)
    included, passages, reading = reading_of(retrieval, message=message)
    features = answerability.features(retrieval.question, passages, reading, retrieval.gate.max_score)
    answers = model.probability(features)
    refuse_below, low_below = answerability.thresholds(model, conf.reader_min_score, conf.reader_low_score)
    answer.timings["read"] = round((time.perf_counter() - start) * 1000, 1)
    answer.grounding = reading.audit() | {
        "answerability": round(answers, 4),
        "features": {k: round(v, 4) for k, v in features.items()},
        "threshold": refuse_below,
    }
    missing = reader.unmentioned(message or retrieval.question, passages)
    if missing:
        answer.grounding["unmentioned"] = missing
        answer.refusal = "absent"
        names = ", ".join(f"“{name}”" for name in missing)
        answer.answer = gettext(UNMENTIONED).format(names=names) + listed(included)
        return answer
    if not reading.quotes or answers < refuse_below:
        answer.refusal = "reader"
        answer.answer = gettext(BELOW_READER) + listed(included)
        return answer
    by_label = {c.label: c for c in included}
    answer.citations = [
        citation(by_label[label], quotes=[q for q in reading.quotes if q.passage.label == label])
        for label in dict.fromkeys(q.passage.label for q in reading.quotes)
    ]
    answer.coverage = 1.0  # every sentence is a verbatim quote of the passage it cites
    weak = max(c.score for c in included) < conf.low_confidence_score or answers < low_below
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
        under=chunk.under,
        line_map=chunk.line_map,
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
        answer.answer = gettext(REFUSAL) if grounded.refused else withheld_text(included)
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
    return gettext(WITHHELD) + listed(included)


def listed(included: list[Candidate]) -> str:
    """`` Passages found: S1 manual.md, p. 2, lines 4-15; ….`` in the active language, appended to a refusal."""
    return f" {gettext(PASSAGES_FOUND)} {passages_found(included)}."


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
