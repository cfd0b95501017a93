"""Answering a question from the sources only: ``answer = f(retrieved chunks)``.

Order: retrieval (HyDE, hybrid search, gate, relevance, conflicts) → context →
generation → citation and grounding check → answer class (``compose``) → audit (QueryLog row,
runs.csv line, artifacts/<date>/<run_id>/retrieval.json; ``record``). When the gate finds no
evidence, no LLM is called at all.
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any

from django.conf import settings

from core import llm
from generation import audit
from generation.answers.answer import (
    Answer,
    Progress,
    QueryFailed,
    Sentences,
    answer_pieces,
    elapsed_ms,
    question_clean,
)
from generation.answers.compose import answer_compose
from generation.answers.record import Asked, answer_cached, answer_record, cache_key
from generation.models import Conversation, QueryLog
from retrieval.services.retrieve import Retrieval, retrieve

logger = logging.getLogger(__name__)


def _no_progress(stage: str) -> None:
    return None


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
    quoted: tuple[str, ...] = (),
) -> Answer:
    """Answer from the sources or refuse; every call leaves exactly one QueryLog row (``answer_logged``).

    ``message`` and ``conversation`` are logged on the row, ``quoted`` read with ``message`` (``Asked``).
    """
    asked = Asked(user=user, collection_ids=collection_ids, message=message, conversation=conversation, quoted=quoted)
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
    key = cache_key(question, asked.collection_ids, mode, top_k, message=asked.message, quoted=asked.quoted)
    if settings.FOUNDRY.generation.cache_answers:
        cached = answer_cached(key, question=question, run_id=run_id, started=started, asked=asked)
        if cached is not None:
            if on_sentence is not None and cached[0].citations:
                for piece in answer_pieces(cached[0].answer):
                    on_sentence(piece)
            return cached
    with llm.record_calls() as calls:
        retrieval = None
        try:
            progress("retrieving")
            retrieval = retrieve(
                question=question,
                collection_ids=asked.collection_ids,
                mode=mode,
                top_k=top_k,
                quoted=asked.quoted,
            )
            answer = answer_compose(
                retrieval,
                run_id=run_id,
                model=settings.FOUNDRY.generation.model,
                progress=progress,
                on_sentence=on_sentence,
                message=asked.message,
            )
        except llm.LLMError as exc:
            failed = _failed(run_id, question, mode, retrieval, calls, exc, started)
            answer_record(failed, asked=asked, channels=retrieval.channels_dict() if retrieval else {}, error=exc)
            logger.warning("query %s failed: %s", run_id, type(exc).__name__)
            raise QueryFailed(f"The model failed while answering: {exc}", run_id=run_id) from exc
    answer.timings["total"] = elapsed_ms(started)
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
        timings={**(retrieval.timings if retrieval else {}), "total": elapsed_ms(started)},
        llm_calls=calls.llm_calls,
        tokens={"prompt": calls.prompt_tokens, "completion": calls.completion_tokens},
        model=getattr(exc, "model", ""),
    )
