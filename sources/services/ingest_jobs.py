"""Ingest jobs: a folder ingest as a tracked, resumable run.

Life of a job (every step idempotent, so a re-delivered task or a re-queued job
does no double work and leaves no duplicates):

1. ``ingest_job_create`` scans the target and records the candidates (pending).
2. ``ingest_job_run`` (db queue) claims it pending → running by a conditional
   update, records skipped and unchanged files, and sends every other file to
   ``prepare_source`` (compute queue) chained to ``store_source`` (db queue).
   Files that already have a result are never sent again.
3. ``ingest_job_file_store`` / ``ingest_job_file_fail`` write one file and its
   result in one transaction; a file that already has a result is left alone.
   The last result finishes the job: sources whose file is gone are removed.
4. Every task working for the job sends a heartbeat (``ingest_job_beat``) while it works,
   and a prepare names its file: each file sent to the workers has an ``IngestJobFile`` row
   with its own last beat, gone with its result. The stale-run sweeper (``core.jobs``) sends
   a file again whose worker fell silent while the job goes on (``ingest_sweep``), re-queues
   a job that shows no sign of life at all, and fails either with a reason after too many attempts.

Without a broker the same steps run in-process, in order.
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import DatabaseError, transaction
from django.db.models import F
from django.db.models.functions import Coalesce
from django.utils import timezone

from core import jobs
from sources.models import IngestJob, IngestJobFile, Source
from sources.services import ingest, prepare
from sources.services.ingest import FileResult, IngestReport, ProgressFn

logger = logging.getLogger(__name__)

POLL_SECONDS = 0.5


class JobStateError(Exception):
    """The job cannot make this transition (e.g. retrying a running job)."""


class IngestJobFailed(Exception):
    """The job as a whole failed (not one of its files); the message is the recorded reason."""


class IngestJobBusy(Exception):
    """An unfinished job already works on this folder for this collection (``exclusive`` jobs only)."""

    def __init__(self, job: IngestJob) -> None:
        super().__init__(
            f"ingest job {job.pk} on {job.target} is still {job.status}; if no process works on it "
            f"any more, `foundry jobs sweep` fails it"
        )
        self.job = job


def ingest_job_create(
    *,
    target: Path,
    collection: str = ingest.DEFAULT_COLLECTION,
    include_private: bool | None = None,
    move: bool = False,
    exclusive: bool = False,
) -> IngestJob:
    """Scan ``target`` and record a pending job for it.

    Raises FileNotFoundError for a missing target, ValueError for an invalid new collection name or,
    unless ``move``, for files already in another collection (ingesting them would move them). With
    ``exclusive``, raises IngestJobBusy while another job for the same target and collection is pending
    or running (the check and the new job share one write transaction, so two callers cannot both pass).
    """
    conf = settings.FOUNDRY.ingest
    include_private = conf.include_private if include_private is None else include_private
    target = Path(os.path.abspath(target))
    root, candidates = prepare.scan(target, include_private=include_private, max_file_mb=conf.max_file_mb)
    with transaction.atomic():  # a refused ingest leaves no new, empty collection behind
        coll = ingest.collection_get_or_create(name=collection)
        if not move:
            ingest.collection_moves_check(root=root, rels=[c.rel for c in candidates], collection=coll)
        if exclusive:
            busy = (
                IngestJob.objects.filter(
                    collection=coll, target=str(target), status__in=[IngestJob.Status.PENDING, IngestJob.Status.RUNNING]
                )
                .order_by("pk")
                .first()
            )
            if busy is not None:
                raise IngestJobBusy(busy)
        return IngestJob.objects.create(
            collection=coll,
            target=str(target),
            root=str(root),
            files_total=len(candidates),
            options={
                "include_private": include_private,
                "model": settings.FOUNDRY.embedding.model,
                "is_dir": target.is_dir(),
                "candidates": [[c.rel, c.skip_reason] for c in candidates],
            },
        )


def ingest_job_enqueue(*, job_id: int, on_file: ProgressFn | None = None) -> None:
    """Start a pending job: on the workers when a broker is configured, else right here.

    Call it outside any open transaction, so the worker sees the committed job.
    """
    if jobs.is_eager():
        ingest_job_run(job_id=job_id, on_file=on_file)
        return
    jobs.registered_task("ingest.run").delay(job_id)


def ingest_job_execute(*, job_id: int, on_file: ProgressFn | None = None) -> IngestJob:
    """Start the job and wait until it finishes, calling ``on_file`` for each file result as it lands."""
    ingest_job_enqueue(job_id=job_id, on_file=on_file)
    job = IngestJob.objects.get(pk=job_id)
    if not jobs.is_eager():
        job = ingest_job_wait(job_id=job_id, on_file=on_file)
    if job.status == IngestJob.Status.FAILED:
        raise IngestJobFailed(f"ingest job {job_id} failed: {job.error}")
    return job


def ingest_job_wait(
    *, job_id: int, on_file: ProgressFn | None = None, seen: int = 0, timeout: float | None = None
) -> IngestJob:
    """Poll the job until it is finished (or ``timeout`` seconds pass) and return it."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        job = IngestJob.objects.get(pk=job_id)
        if on_file:
            for result in job.results[seen:]:
                on_file(FileResult(**result))
        seen = len(job.results)
        if job.is_finished or (deadline is not None and time.monotonic() > deadline):
            return job
        time.sleep(POLL_SECONDS)


def ingest_job_run(*, job_id: int, on_file: ProgressFn | None = None) -> None:
    """Claim a pending job and put each of its files to work. A job that is not pending is left alone."""
    now = timezone.now()
    claimed = IngestJob.objects.filter(pk=job_id, status=IngestJob.Status.PENDING).update(
        status=IngestJob.Status.RUNNING,
        stage=IngestJob.Stage.CHECKING,
        started_at=Coalesce("started_at", now),
        heartbeat_at=now,
        attempts=F("attempts") + 1,
    )
    if not claimed:
        logger.info("ingest job=%s not pending; nothing to do", job_id)
        return
    job = IngestJob.objects.get(pk=job_id)
    todo = _check_files(job, on_file)
    if not todo:
        return
    eager = jobs.is_eager()
    # One transaction: the sweeper looks for lost files only in a job that is processing, and by
    # then the rows left by an attempt before this one say "sent, not started" again.
    with transaction.atomic():
        IngestJob.objects.filter(pk=job_id, status=IngestJob.Status.RUNNING).update(
            stage=IngestJob.Stage.PROCESSING, heartbeat_at=timezone.now()
        )
        if not eager:
            _files_sent(job_id, todo)
    logger.info("ingest job=%s dispatching files=%s", job_id, len(todo))
    if eager:
        for rel in todo:
            _process_in_process(job_id, job.root, rel, on_file)
    else:
        _dispatch(job_id, job.root, todo)


def _files_sent(job_id: int, rels: list[str]) -> None:
    """Record each file as sent to the workers and not yet started (caller holds the transaction)."""
    IngestJobFile.objects.filter(job_id=job_id).update(beat_at=None, attempts=F("attempts") + 1)
    IngestJobFile.objects.bulk_create(
        [IngestJobFile(job_id=job_id, path=rel) for rel in rels], ignore_conflicts=True, batch_size=500
    )


def ingest_job_beat(*, job_id: int, rel: str | None = None) -> None:
    """Record that a worker is still at work on the job, and with ``rel`` on that file of it.

    Only a running job and a file still without a result are touched, so a beat that arrives
    after the job finished (or was failed), or after its file's result, changes nothing.
    """
    now = timezone.now()
    with transaction.atomic():
        alive = IngestJob.objects.filter(pk=job_id, status=IngestJob.Status.RUNNING).update(heartbeat_at=now)
        if alive and rel is not None:
            IngestJobFile.objects.filter(job_id=job_id, path=rel).update(beat_at=now)


def _check_files(job: IngestJob, on_file: ProgressFn | None) -> list[str]:
    """Record skipped and unchanged files at once; return the paths that need work."""
    done = _paths_done(job)
    settled: list[FileResult] = []
    todo: list[str] = []
    beat_at = time.monotonic()
    for rel, skip_reason in job.options["candidates"]:
        if time.monotonic() - beat_at > jobs.heartbeat_interval():  # hashing a large folder takes a while
            ingest_job_beat(job_id=job.pk)
            beat_at = time.monotonic()
        if rel in done:
            continue
        if skip_reason:
            settled.append(FileResult(rel, "skipped", skip_reason))
            continue
        unchanged = _unchanged(job, rel)
        if unchanged is not None:
            settled.append(unchanged)
        else:
            todo.append(rel)
    if settled or not todo:  # nothing left to do still has to finish the job (e.g. an empty folder)
        with transaction.atomic():
            _append(IngestJob.objects.get(pk=job.pk), settled, on_file)
    return todo


def _unchanged(job: IngestJob, rel: str) -> FileResult | None:
    try:
        digest = prepare.file_digest(Path(job.root) / rel)
    except OSError:
        return None  # the prepare step reports the read error with its reason
    existing = ingest.source_unchanged(root=job.root, rel=rel, collection_id=job.collection_id, digest=digest)
    return FileResult(rel, "unchanged", "", existing.chunk_count) if existing else None


def _dispatch(job_id: int, root: str, rels: list[str]) -> None:
    """One chain per file: prepare on ``compute``, store on ``db``; a failure of either is recorded by the errback."""
    from celery import chain

    prepare_source, store_source, file_failed = (
        jobs.registered_task(name) for name in ("ingest.prepare", "ingest.store", "ingest.file_failed")
    )
    for rel in rels:
        on_error = file_failed.s(job_id, rel)
        chain(
            prepare_source.s(root, rel, job_id).on_error(on_error), store_source.s(job_id, rel).on_error(on_error)
        ).apply_async()


def ingest_job_file_send(*, job_id: int, root: str, rel: str) -> None:
    """Send one file of a running job to the workers again (the sweeper found its worker lost).

    Its row is already claimed by the caller. Should the first send still land after all,
    the done mark and the idempotent store keep the second one out.
    """
    _dispatch(job_id, root, [rel])


def _process_in_process(job_id: int, root: str, rel: str, on_file: ProgressFn | None) -> None:
    try:
        payload = jobs.registered_task("ingest.prepare").delay(root, rel).get()
    except Exception as exc:  # recorded as the file's failure, as the broker's errback would
        logger.exception("prepare failed job=%s", job_id)
        ingest_job_file_fail(job_id=job_id, rel=rel, reason=jobs.failure_reason(exc), on_file=on_file)
        return
    ingest_job_file_store(job_id=job_id, rel=rel, payload=payload, on_file=on_file)


def ingest_job_file_prepare(*, root: str, rel: str, job_id: int | None = None) -> dict[str, Any]:
    """The compute step for one file of a job (no database). A file already recorded is not redone."""
    if job_id is not None and jobs.done_check(_file_key(job_id, rel)):
        logger.info("ingest job=%s file already recorded; dropping duplicate prepare", job_id)
        return {"v": prepare.PAYLOAD_VERSION, "status": "duplicate", "path": rel}
    return prepare.source_prepare(root=root, rel=rel)


def ingest_job_dropped(*, job_id: int) -> None:
    """The job was failed (stale): compute workers drop the prepares still queued for its files without a
    result; ``ingest_job_retry`` clears the marks again. Its files are no longer followed one by one."""
    IngestJobFile.objects.filter(job_id=job_id).delete()
    job = IngestJob.objects.filter(pk=job_id).first()
    if job is not None:
        done = _paths_done(job)
        jobs.done_mark(*(_file_key(job_id, rel) for rel, _ in job.options["candidates"] if rel not in done))


def _file_key(job_id: int, rel: str) -> str:
    return f"ingest:{job_id}:{hashlib.sha1(rel.encode()).hexdigest()}"


def ingest_job_file_store(
    *, job_id: int, rel: str, payload: dict[str, Any], on_file: ProgressFn | None = None
) -> FileResult | None:
    """Write one prepared file and record its result, in one transaction.

    Idempotent: returns None (and writes nothing) when the job is gone or the file already has a result.
    """
    if payload["status"] == "duplicate":
        return None
    with transaction.atomic():
        job = IngestJob.objects.filter(pk=job_id).first()
        if job is None or rel in _paths_done(job):
            logger.info("ingest job=%s file already recorded or job gone; skipping store", job_id)
            return None
        result = ingest.source_store_prepared(root=job.root, rel=rel, collection_id=job.collection_id, payload=payload)
        _append(job, [result], on_file)
        IngestJobFile.objects.filter(job_id=job_id, path=rel).delete()
        transaction.on_commit(lambda: jobs.done_mark(_file_key(job_id, rel)))
    return result


def ingest_job_file_fail(*, job_id: int, rel: str, reason: str, on_file: ProgressFn | None = None) -> FileResult | None:
    """Record that one file failed for good (crash, time limit, retries used up). Idempotent like the store."""
    with transaction.atomic():
        job = IngestJob.objects.filter(pk=job_id).first()
        if job is None or rel in _paths_done(job):
            return None
        result = ingest.source_mark_failed(root=job.root, rel=rel, collection_id=job.collection_id, reason=reason)
        _append(job, [result], on_file)
        IngestJobFile.objects.filter(job_id=job_id, path=rel).delete()
        transaction.on_commit(lambda: jobs.done_mark(_file_key(job_id, rel)))
    return result


def _paths_done(job: IngestJob) -> set[str]:
    return {r["path"] for r in job.results if r["status"] != "removed"}


def _append(job: IngestJob, results: list[FileResult], on_file: ProgressFn | None) -> None:
    """Add results to the job (caller holds the transaction); the last one finishes the job."""
    job.results = [*job.results, *(asdict(r) for r in results)]
    job.files_done += len(results)
    job.chunks_done += sum(r.chunks for r in results if r.status == "ingested")
    job.heartbeat_at = timezone.now()
    fields = ["results", "files_done", "chunks_done", "heartbeat_at"]
    # A job the sweeper failed finishes too when the work queued before that lands after all.
    if job.files_done >= job.files_total and job.status in (IngestJob.Status.RUNNING, IngestJob.Status.FAILED):
        removed = _remove_gone(job)
        job.results = [*job.results, *(asdict(r) for r in removed)]
        results = [*results, *removed]
        job.status, job.stage, job.finished_at = IngestJob.Status.SUCCEEDED, IngestJob.Stage.DONE, timezone.now()
        job.error = ""
        fields += ["status", "stage", "finished_at", "error"]
        logger.info("ingest job=%s succeeded files=%s chunks=%s", job.pk, job.files_done, job.chunks_done)
    job.save(update_fields=fields)
    if on_file:
        for result in results:
            on_file(result)


def _remove_gone(job: IngestJob) -> list[FileResult]:
    """Sources under the job's folder whose file is no longer there (folder ingests only)."""
    if not job.options.get("is_dir"):
        return []
    seen = [rel for rel, skip in job.options["candidates"] if not skip]
    removed = []
    for gone in Source.objects.filter(root=job.root).exclude(path__in=seen).order_by("path"):
        ingest.source_delete(source_id=gone.pk)
        removed.append(FileResult(gone.path, "removed", "file no longer in the folder"))
    return removed


def ingest_job_abort(*, job_id: int, reason: str) -> None:
    """Fail a running job whose process hit an error it cannot go on from (disk full, a lock held too long).

    Best effort: the same fault may stop this write too (a full disk), and then the
    stale-run sweeper fails the job later. Results already recorded stay.
    """
    try:
        IngestJob.objects.filter(pk=job_id, status__in=[IngestJob.Status.PENDING, IngestJob.Status.RUNNING]).update(
            status=IngestJob.Status.FAILED, error=reason[:2000], finished_at=timezone.now()
        )
    except DatabaseError:
        logger.exception("ingest job=%s could not be marked failed", job_id)


def ingest_job_report(job: IngestJob) -> IngestReport:
    """The job's results in scan order (removed files last), as ``foundry ingest`` prints them."""
    order = {rel: i for i, (rel, _) in enumerate(job.options["candidates"])}
    files = [FileResult(**r) for r in job.results]
    scanned = sorted((f for f in files if f.status != "removed"), key=lambda f: order.get(f.path, len(order)))
    return IngestReport(files=[*scanned, *(f for f in files if f.status == "removed")])


def ingest_job_retry(*, job_id: int) -> IngestJob:
    """Put a finished job back in the queue to redo its failed files (or, for a failed job, the rest).

    Raises JobStateError for a job that is still pending or running, or that has nothing to redo.
    """
    with transaction.atomic():
        job = IngestJob.objects.filter(pk=job_id).first()
        if job is None:
            raise JobStateError(f"no ingest job {job_id}")
        if not job.is_finished:
            raise JobStateError(f"ingest job {job_id} is {job.status}; only a finished job can be retried")
        keep = [r for r in job.results if r["status"] not in ("failed", "removed")]
        kept = {r["path"] for r in keep}
        redo = [rel for rel, _ in job.options["candidates"] if rel not in kept]
        if job.status == IngestJob.Status.SUCCEEDED and len(keep) == job.files_total:
            raise JobStateError(f"ingest job {job_id} succeeded with no failed files; nothing to retry")
        IngestJob.objects.filter(pk=job_id, status=job.status).update(
            status=IngestJob.Status.PENDING,
            stage=IngestJob.Stage.QUEUED,
            error="",
            results=keep,
            files_done=len(keep),
            chunks_done=sum(r["chunks"] for r in keep if r["status"] == "ingested"),
            attempts=0,
            finished_at=None,
            heartbeat_at=timezone.now(),
        )
        IngestJobFile.objects.filter(job_id=job_id).delete()  # a retry counts each file's attempts afresh
    jobs.done_clear([_file_key(job_id, rel) for rel in redo])
    logger.info("ingest job=%s re-queued by retry", job_id)
    ingest_job_enqueue(job_id=job_id)
    return IngestJob.objects.get(pk=job_id)


def knowledge_base_ingest(
    *,
    target: Path,
    collection: str = ingest.DEFAULT_COLLECTION,
    include_private: bool | None = None,
    move: bool = False,
    progress: ProgressFn | None = None,
) -> IngestReport:
    """Ingest every file under ``target`` and remove sources whose file is gone; wait for the result.

    Runs as an ``IngestJob``: in-process without a broker, on the workers with one.
    ``progress`` is called once per file result.
    """
    job = ingest_job_create(target=target, collection=collection, include_private=include_private, move=move)
    job = ingest_job_execute(job_id=job.pk, on_file=progress)
    return ingest_job_report(job)
