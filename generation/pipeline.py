"""A generation run in three steps, so that the model work can run on any machine.

1. ``generation_run_prepare`` (``db`` queue, next to the SQLite file) claims the
   pending run by a conditional update, retrieves the passages, assembles the
   prompt, records retrieval on the run and returns the compute payload: plain
   JSON holding everything the model step needs (prompt, passage texts, footnote
   texts, model settings).
2. ``generation_run_compute`` (``compute`` queue) never opens the database: the
   model call, the grounding check (embeddings) and the footnotes. It returns the
   finished document, or a failed result with its reason. Transient model errors
   are raised, so the task is retried with backoff.
3. ``generation_run_store`` (``db`` queue) writes the document (temp file + rename)
   and finishes the run in one transaction. A run that is already finished is
   left alone, so a duplicate result writes nothing.

A failure the compute step cannot report itself (its worker died on every
delivery, a time limit, retries used up) reaches ``generation_run_fail`` through
the errback. A run whose worker vanished is re-queued by the stale-run sweeper
(``generation/apps.py``), which claims it afresh: ``attempts`` counts the claims.

Without a broker the same steps run in-process, in order (``generation_run_start``).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from foundry_site.core import grounding, jobs, llm
from foundry_site.core.config import EXTRACTIVE
from generation import writer
from generation.documents import (
    GenerationError,
    SpecText,
    document_prepare,
    footnote_text,
    footnotes_render,
    ground_markdown,
    low_coverage_note,
    topic_request,
    write_atomic,
)
from generation.models import GenerationRun
from retrieval.services.retrieve import retrieve
from sources.vectorstore import MissingEmbeddings

logger = logging.getLogger(__name__)

PAYLOAD_VERSION = 3
Progress = Callable[[str], None]
_OPEN = (GenerationRun.Status.PENDING, GenerationRun.Status.RUNNING)
# Failures that end a run with their own message (no evidence, model failed, index built
# with another embedding model); anything else is unexpected and also raised.
RUN_FAILURES = (GenerationError, llm.LLMError, MissingEmbeddings)


def generation_run_start(*, run_id: int) -> None:
    """Claim a pending run and execute it: model work on ``compute`` with a broker, here without one.

    Idempotent: a run that is not pending (or gone) is left alone.
    """
    payload = generation_run_prepare(run_id=run_id)
    if payload is None:
        return
    if not jobs.is_eager():
        _dispatch(payload)
        return
    try:
        result = generation_run_compute(payload=payload, progress=_progress_here(payload))
        generation_run_store(result=result)
    except Exception as exc:  # recorded on the run as the broker's errback would, then raised as before
        generation_run_fail(run_id=run_id, error=error_record(exc))
        raise


def _dispatch(payload: dict[str, Any]) -> None:
    from celery import chain

    from generation.tasks import generate_compute, generate_failed, generate_store

    on_error = generate_failed.s(payload["run_id"])
    chain(generate_compute.s(payload).on_error(on_error), generate_store.s().on_error(on_error)).apply_async()


def _progress_here(payload: dict[str, Any]) -> Progress:
    return lambda stage: generation_run_progress(run_id=payload["run_id"], attempt=payload["attempt"], stage=stage)


# --------------------------------------------------------------------------- db side


def generation_run_prepare(*, run_id: int) -> dict[str, Any] | None:
    """Claim the run, retrieve and assemble the prompt; return the compute payload.

    Returns None when there is nothing to send: the run was not pending (or is
    gone), or it failed here (no evidence: no model call, no file). A transient
    error with a broker puts the run back to pending and is raised, so the
    retried task claims it again.
    """
    now = timezone.now()
    claimed = GenerationRun.objects.filter(pk=run_id, status=GenerationRun.Status.PENDING).update(
        status=GenerationRun.Status.RUNNING,
        started_at=now,
        heartbeat_at=now,
        stage="retrieval",
        attempts=F("attempts") + 1,
    )
    if not claimed:
        logger.info("generation run %s not pending; nothing to do", run_id)
        return None
    run = GenerationRun.objects.get(pk=run_id)
    try:
        return _prepare(run)
    except Exception as exc:
        if jobs.is_transient(exc) and not jobs.is_eager():
            GenerationRun.objects.filter(pk=run_id, status=GenerationRun.Status.RUNNING).update(
                status=GenerationRun.Status.PENDING, stage="", heartbeat_at=timezone.now(), attempts=F("attempts") - 1
            )
            raise
        generation_run_fail(run_id=run_id, error=error_record(exc))
        if isinstance(exc, RUN_FAILURES):
            return None
        raise


def _prepare(run: GenerationRun) -> dict[str, Any] | None:
    conf = settings.FOUNDRY
    if conf.generation.model == EXTRACTIVE:
        return _prepare_extractive(run)
    with llm.record_calls() as calls:  # HyDE and relevance scoring may call a model
        prepared = document_prepare(
            topic=run.topic,
            spec=SpecText(run.spec_name, run.spec_version, run.spec_body),
            collection_ids=run.collection_ids,
        )
    r = prepared.retrieval
    GenerationRun.objects.filter(pk=run.pk).update(
        gate=r.gate.as_dict(),
        conflicts=[c.as_dict() for c in r.conflicts],
        timings=dict(r.timings),
        chunks=[
            {"chunk_id": c.chunk.pk, "label": c.label, "score": round(c.score, 4), "ranks": c.ranks}
            for c in r.candidates
        ],
        models_used={"generation": conf.generation.model, "embedding": conf.embedding.model},
        prompt=prepared.system,
        heartbeat_at=timezone.now(),
        **usage_of(calls),
    )
    _evidence_check(run, found=bool(prepared.included), gate_reason=r.gate.reason)
    return {
        "v": PAYLOAD_VERSION,
        "run_id": run.pk,
        "attempt": run.attempts,
        "topic": run.topic,
        "system": prepared.system,
        "model": conf.generation.model,
        "max_tokens": conf.generation.max_document_tokens,
        "temperature": conf.generation.temperature,
        "embedding_model": conf.embedding.model,
        "min_support": conf.generation.min_support,
        "min_coverage": conf.generation.min_coverage,
        "passages": [{"label": c.label, "text": c.chunk.text, "footnote": footnote_text(c)} for c in prepared.included],
    }


def _prepare_extractive(run: GenerationRun) -> dict[str, Any]:
    """The extractive writer's payload: per section of the spec's outline, its passages (retrieved here)."""
    conf = settings.FOUNDRY
    topic = retrieve(question=run.topic, collection_ids=run.collection_ids)
    sections, found = writer.sections_prepare(
        topic=run.topic,
        body=run.spec_body,
        collection_ids=run.collection_ids,
        max_passages=conf.generation.max_passages,
    )
    conflicts = {json.dumps(c.as_dict(), sort_keys=True): c.as_dict() for c in topic.conflicts}
    GenerationRun.objects.filter(pk=run.pk).update(
        gate=topic.gate.as_dict(),
        conflicts=list(conflicts.values()),
        timings=dict(topic.timings),
        chunks=[
            {"chunk_id": c.chunk.pk, "label": c.label, "score": round(c.score, 4), "ranks": c.ranks}
            for c in found.values()
        ],
        models_used={"generation": EXTRACTIVE, "embedding": conf.embedding.model},
        prompt=json.dumps({"writer": EXTRACTIVE, "sections": sections}, indent=1),
        heartbeat_at=timezone.now(),
    )
    _evidence_check(run, found=topic.gate.passed and bool(found), gate_reason=topic.gate.reason)
    return {
        "v": PAYLOAD_VERSION,
        "run_id": run.pk,
        "attempt": run.attempts,
        "topic": run.topic,
        "writer": EXTRACTIVE,
        "sections": sections,
        "embedding_model": conf.embedding.model,
        "min_score": conf.generation.writer_min_score,
        "min_coverage": conf.generation.min_coverage,
        "conflicts": [conflict_markdown(c) for c in conflicts.values()],
        "precedence": writer.precedence_notes(run.spec_body),
        "passages": {str(cid): writer.passage_payload(c, footnote_text(c)) for cid, c in found.items()},
    }


def _evidence_check(run: GenerationRun, *, found: bool, gate_reason: str) -> None:
    """No evidence: the run fails here, before any model work. Else, with a broker, it waits for compute."""
    if not found:
        raise GenerationError(
            f"No supporting documentation found in indexed sources ({gate_reason}); no document was generated."
        )
    if not jobs.is_eager():
        GenerationRun.objects.filter(pk=run.pk, status=GenerationRun.Status.RUNNING).update(stage="queued")


def conflict_markdown(conflict: dict[str, Any]) -> str:
    a, b = conflict["a"], conflict["b"]
    return f'- {a["source"]} ({a["where"]}): "{a["quote"]}" — but {b["source"]} ({b["where"]}): "{b["quote"]}"'


def generation_run_progress(*, run_id: int, attempt: int, stage: str) -> None:
    """Record the stage the compute step reached (and a heartbeat). Ignored once the run is finished
    or claimed again by a later attempt, so late or duplicate reports change nothing."""
    GenerationRun.objects.filter(pk=run_id, status=GenerationRun.Status.RUNNING, attempts=attempt).update(
        stage=stage, heartbeat_at=timezone.now()
    )


def generation_run_store(*, result: dict[str, Any]) -> bool:
    """Write the document and finish the run, in one transaction; True if this call finished it.

    Idempotent: a duplicate result, or one for a run that is already finished
    (or gone), writes nothing. The file is written before the commit, so a
    failed write leaves the run open (and the errback fails it with the reason).
    """
    run_id = result["run_id"]
    if result["status"] == "duplicate":
        return False
    with transaction.atomic():
        run = GenerationRun.objects.filter(pk=run_id, status__in=_OPEN).first()
        if run is None:
            logger.info("generation run %s already finished or gone; result dropped", run_id)
            return False
        checked = {
            key: result[key]
            for key in ("sentences_total", "sentences_kept", "coverage", "low_confidence", "grounding")
            if key in result
        }
        if result["status"] == "generated":
            write_atomic(Path(run.output_path), result["document"])
            review = result.get("low_confidence")
            status = GenerationRun.Status.NEEDS_REVIEW if review else GenerationRun.Status.SUCCEEDED
            error = None
        else:
            status, error = GenerationRun.Status.FAILED, result["error"]
        _finish(run, status=status, error=error, usage=result["usage"], timings=result["timings"], **checked)
    logger.info("generation run %s %s (attempt %s)", run_id, status, result["attempt"])
    return True


def generation_run_fail(*, run_id: int, error: dict[str, Any]) -> bool:
    """Fail an unfinished run with ``error`` ({type, message, transient}); True if this call failed it."""
    with transaction.atomic():
        run = GenerationRun.objects.filter(pk=run_id, status__in=_OPEN).first()
        if run is None:
            return False
        _finish(run, status=GenerationRun.Status.FAILED, error=error, usage={}, timings={})
    logger.info("generation run %s failed: %s", run_id, error.get("type"))
    return True


def _finish(
    run: GenerationRun,
    *,
    status: str,
    error: dict[str, Any] | None,
    usage: dict[str, Any],
    timings: dict[str, float],
    **fields: Any,
) -> None:
    """Close the run (caller holds the transaction): add the compute step's usage, total the time."""
    total = (timezone.now() - run.started_at).total_seconds() * 1000 if run.started_at else 0.0
    GenerationRun.objects.filter(pk=run.pk).update(
        status=status,
        error=error,
        stage="done",
        finished_at=timezone.now(),
        heartbeat_at=timezone.now(),
        timings={**run.timings, **timings, "total": round(total, 1)},
        llm_calls=F("llm_calls") + usage.get("llm_calls", 0),
        prompt_tokens=F("prompt_tokens") + usage.get("prompt_tokens", 0),
        completion_tokens=F("completion_tokens") + usage.get("completion_tokens", 0),
        cost=F("cost") + usage.get("cost", 0.0),
        **fields,
    )
    run_id = run.pk
    transaction.on_commit(lambda: jobs.done_mark(_done_key(run_id)))


def generation_run_dropped(*, run_id: int) -> None:
    """The run was failed (stale): a compute worker drops the messages still queued for it."""
    jobs.done_mark(_done_key(run_id))


def _done_key(run_id: int) -> str:
    return f"generation:{run_id}"


# --------------------------------------------------------------------------- compute side


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
    if jobs.done_check(_done_key(payload["run_id"])):
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


# --------------------------------------------------------------------------- shared


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
