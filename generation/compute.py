"""The model step of a generation run, from its JSON payload alone: it never opens the database, so it runs
on any machine (the ``compute`` queue). The model call, the grounding check (embeddings) and the footnotes;
or the extractive writer's quotes. The result is JSON again, for ``generation.pipeline`` to store.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from core import grounding, jobs, llm
from core.config import EXTRACTIVE
from generation import writer
from generation.documents import GenerationError, topic_request
from generation.footnotes import footnotes_render
from generation.grounded_markdown import ground_markdown, low_coverage_note
from sources.vectorstore import MissingEmbeddings

logger = logging.getLogger(__name__)

PAYLOAD_VERSION = 3
Progress = Callable[[str], None]
# Failures that end a run with their own message (no evidence, model failed, index built
# with another embedding model); anything else is unexpected and also raised.
RUN_FAILURES = (GenerationError, llm.LLMError, MissingEmbeddings)


def generation_run_compute(*, payload: dict[str, Any], progress: Progress | None = None) -> dict[str, Any]:
    """The model step, from the payload alone: never opens the database.

    Returns a JSON result for ``generation_run_store``: ``generated`` with the
    document, ``failed`` with the reason (no evidence kept, a permanent model
    error), or ``duplicate`` when the run was already finished (a re-delivered
    message). With a broker a transient model error is raised, for a retry.
    """
    if payload.get("v") != PAYLOAD_VERSION:
        raise GenerationError(
            f"generation payload version {payload.get('v')!r}; this worker reads "
            f"{PAYLOAD_VERSION} (upgrade the workers together)"
        )
    head = {"v": PAYLOAD_VERSION, "run_id": payload["run_id"], "attempt": payload["attempt"]}
    if jobs.done_check(done_key(payload["run_id"])):
        logger.info("generation run %s already finished; dropping duplicate compute", payload["run_id"])
        return {**head, "status": "duplicate"}
    fields: dict[str, Any] = {"timings": {}}
    with llm.record_calls() as calls:
        try:
            document = _compute(payload, progress or (lambda stage: None), fields)
            outcome: dict[str, Any] = {"status": "generated", "document": document}
        except (GenerationError, llm.LLMError) as exc:
            if getattr(exc, "transient", False) and not jobs.is_eager():
                raise
            outcome = {"status": "failed", "error": error_record(exc)}
    return {**head, **outcome, **fields, "usage": usage_of(calls)}


def _compute(payload: dict[str, Any], progress: Progress, fields: dict[str, Any]) -> str:
    """Generate, ground, add footnotes; fills ``fields`` (kept on the run even when a step fails)."""
    if payload.get("writer") == EXTRACTIVE:
        return _compute_extractive(payload, progress, fields)
    progress("generate")
    start = time.perf_counter()
    reply = llm.complete(
        messages=[
            {"role": "system", "content": payload["system"]},
            {"role": "user", "content": topic_request(payload["topic"])},
        ],
        purpose="generate",
        model=payload["model"],
        max_tokens=payload["max_tokens"],
        temperature=payload["temperature"],
    )
    fields["timings"]["generate"] = round((time.perf_counter() - start) * 1000, 1)
    text = grounding.reply_text(reply, payload["max_tokens"])
    progress("grounding")
    start = time.perf_counter()
    passages = payload["passages"]
    grounded = ground_markdown(
        text,
        {p["label"]: p["text"] for p in passages},
        embedding_model=payload["embedding_model"],
        min_support=payload["min_support"],
    )
    fields["timings"]["grounding"] = round((time.perf_counter() - start) * 1000, 1)
    fields.update(
        sentences_total=grounded.total,
        sentences_kept=grounded.supported,
        coverage=grounded.coverage,
        grounding=grounded.audit(reply.text),
    )
    if not grounded.supported:
        raise GenerationError("The grounding check removed every sentence the model wrote; no document was written.")
    document = footnotes_render(grounded.text, {p["label"]: p["footnote"] for p in passages}, title=payload["topic"])
    fields["low_confidence"] = grounded.coverage is not None and grounded.coverage < payload["min_coverage"]
    if fields["low_confidence"]:
        document = low_coverage_note(document, kept=grounded.supported, total=grounded.total)
    return document


def _compute_extractive(payload: dict[str, Any], progress: Progress, fields: dict[str, Any]) -> str:
    """The extractive writer: every section's best units quoted verbatim, with a footnote each (no LLM)."""
    progress("reading")
    start = time.perf_counter()
    body, notes, audit = writer.document_write(
        topic=payload["topic"],
        title=payload["topic"],
        sections=payload["sections"],
        passages=payload["passages"],
        conflicts=payload["conflicts"],
        notes=payload["precedence"],
        embedding_model=payload["embedding_model"],
        min_score=payload["min_score"],
    )
    fields["timings"]["read"] = round((time.perf_counter() - start) * 1000, 1)
    quoted = len(notes)
    empty = sum(1 for s in audit["sections"] if not s["quoted"])
    fields.update(
        sentences_total=quoted,
        sentences_kept=quoted,
        coverage=1.0 if quoted else None,
        grounding={"writer": EXTRACTIVE, **audit},
        low_confidence=bool(quoted) and empty * 2 > len(audit["sections"]),
    )
    if not quoted:
        raise GenerationError("No section of the outline has a passage close enough to quote; no document was written.")
    return footnotes_render(body, notes, title=payload["topic"])


def done_key(run_id: int) -> str:
    """The key a finished run is marked done under: a compute worker drops the messages still queued for it."""
    return f"generation:{run_id}"


def error_record(exc: BaseException) -> dict[str, Any]:
    """What a failed run stores in ``error``."""
    message = str(exc) if isinstance(exc, RUN_FAILURES) else jobs.failure_reason(exc)
    return {"type": type(exc).__name__, "message": message, "transient": jobs.is_transient(exc)}


def usage_of(calls: llm.CallRecord) -> dict[str, Any]:
    return {
        "llm_calls": calls.llm_calls,
        "prompt_tokens": calls.prompt_tokens,
        "completion_tokens": calls.completion_tokens,
        "cost": round(calls.cost, 6),
    }
