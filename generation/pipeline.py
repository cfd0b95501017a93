"""A generation run, from request to file, in three steps, so that the model work can run on any machine.

``generation_run_create`` records the requested run (pending); ``generation_run_execute`` runs it:

1. ``generation_run_prepare`` (``db`` queue, next to the SQLite file) claims the
   pending run by a conditional update, retrieves the passages, assembles the
   prompt, records retrieval on the run and returns the compute payload: plain
   JSON holding everything the model step needs (prompt, passage texts, footnote
   texts, model settings).
2. ``generation_run_compute`` (``compute`` queue, ``generation.compute``) never opens the
   database: the model call, the grounding check (embeddings) and the footnotes. It returns the
   finished document, or a failed result with its reason. Transient model errors
   are raised, so the task is retried with backoff.
3. ``generation_run_store`` (``db`` queue) writes the document (temp file + rename)
   and finishes the run in one transaction. A run that is already finished is
   left alone, so a duplicate result writes nothing.

Guarantees: the retrieval gate runs first (no evidence ⇒ failed run, no LLM call, no file); the output
file is written atomically, so an interrupted run never leaves half a document; a run is claimed by a
conditional update, so executing it twice does the work once.

A failure the compute step cannot report itself (its worker died on every
delivery, a time limit, retries used up) reaches ``generation_run_fail`` through
the errback. A run whose worker vanished is re-queued by the stale-run sweeper
(``generation/apps.py``), which claims it afresh: ``attempts`` counts the claims.

Without a broker the same steps run in-process, in order (``generation_run_execute``).
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from core import jobs, llm
from core.config import EXTRACTIVE
from generation import audit_chain, writer
from generation.compute import (
    PAYLOAD_VERSION,
    RUN_FAILURES,
    Progress,
    done_key,
    error_record,
    generation_run_compute,
    usage_of,
)
from generation.documents import GenerationError, SpecText, document_prepare, topic_clean
from generation.footnotes import footnote_text
from generation.models import GenerationRun
from retrieval.services.conflicts import date_note
from retrieval.services.retrieve import retrieve

logger = logging.getLogger(__name__)

_OPEN = (GenerationRun.Status.PENDING, GenerationRun.Status.RUNNING)


def generation_run_create(
    *,
    topic: str,
    spec: SpecText,
    output_path: str | None = None,
    user: Any = None,
    collection_ids: list[int] | None = None,
) -> GenerationRun:
    """Record a requested run, pending; ``generation_run_execute`` runs it. The document goes to
    ``output_path``, else to ``FOUNDRY_HOME/outputs/run-<id>.md``. GenerationError when the topic is unusable."""
    topic = topic_clean(topic)
    run = GenerationRun.objects.create(
        topic=topic,
        spec_name=spec.name,
        spec_version=spec.version,
        spec_body=spec.body,
        created_by=user if getattr(user, "is_authenticated", False) else None,
        collection_ids=collection_ids,
        output_path=output_path or "",
    )
    if not output_path:
        run.output_path = str(settings.FOUNDRY_HOME / "outputs" / f"run-{run.pk}.md")
        GenerationRun.objects.filter(pk=run.pk).update(output_path=run.output_path)
    return run


def generation_run_execute(*, run_id: int) -> None:
    """Claim a pending run and execute it: model work on the ``compute`` queue with a broker (this returns
    once it is sent), every step here without one.

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

    compute_task, store_task = jobs.registered_task("generation.compute"), jobs.registered_task("generation.store")
    on_error = jobs.registered_task("generation.failed").s(payload["run_id"])
    chain(compute_task.s(payload).on_error(on_error), store_task.s().on_error(on_error)).apply_async()


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
    """One line per conflict; each side with its date, the later one named newer."""
    a, b = conflict["a"], conflict["b"]
    return (
        f'- {a["source"]} ({a["where"]}{date_note(a, b)}): "{a["quote"]}" — '
        f'but {b["source"]} ({b["where"]}{date_note(b, a)}): "{b["quote"]}"'
    )


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
    """Close the run (caller holds the transaction): add the compute step's usage, total the time, and chain the
    finished run onto the audit trail."""
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
    audit_chain.run_chain(run_id=run.pk)
    run_id = run.pk
    transaction.on_commit(lambda: jobs.done_mark(done_key(run_id)))


def generation_run_dropped(*, run_id: int) -> None:
    """The run was failed (stale): a compute worker drops the messages still queued for it."""
    jobs.done_mark(done_key(run_id))


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` via a temp file in the same folder and a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600; a document is a file like any the user writes
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    mask = os.umask(0)  # the only way to read it is to set it; put it back at once
    os.umask(mask)
    return mask
