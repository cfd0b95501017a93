"""The stale-run sweeper's part for ingest jobs: a file whose worker was lost while its job goes on.

A compute worker killed mid-file (SIGKILL, out-of-memory kill, a lost machine) takes its message
with it: Redis gives it back only after the visibility timeout, over half an hour. The job itself
stays alive meanwhile, since its other files keep beating, so the job-level sweep cannot see the
loss until the whole job falls silent. Each file sent to the workers has an ``IngestJobFile`` row
with its own last beat instead; a row whose beat is older than the stale window, in a job whose
own beat is fresh, is a file nobody works on any more (a later beat of any file of the job went
through the same db queue, so this file's beats are not merely waiting behind it).
"""

from __future__ import annotations

import logging
from datetime import datetime

from django.db import transaction
from django.db.models import F, QuerySet
from django.utils import timezone

from core.jobs import SweepAction
from sources.models import IngestJob, IngestJobFile
from sources.services import ingest_jobs

logger = logging.getLogger(__name__)

LABEL = IngestJob._meta.label


def ingest_files_sweep(*, cutoff: datetime, max_attempts: int) -> list[SweepAction]:
    """Send again each file of a live job whose worker fell silent before ``cutoff``; after ``max_attempts``
    sends, fail that file (on its own row, with the reason) and let the job go on.

    A file that was sent but not yet started (still queued) has no beat and is left alone. Each
    file is claimed by a conditional update on its old beat, so two sweepers never both act on it;
    should the lost worker's result land after all, the done mark and the idempotent store keep
    the second one out: every file is recorded once.
    """
    lost = list(
        IngestJobFile.objects.filter(
            beat_at__lt=cutoff,
            job__status=IngestJob.Status.RUNNING,
            job__stage=IngestJob.Stage.PROCESSING,
            job__heartbeat_at__gte=cutoff,
        ).values_list("pk", "job_id", "job__root", "path", "beat_at", "attempts")
    )
    actions = []
    for pk, job_id, root, rel, beat_at, attempts in lost:
        assert beat_at is not None  # beat_at__lt leaves out the files not yet started
        claim = IngestJobFile.objects.filter(pk=pk, beat_at=beat_at)
        idle = int((timezone.now() - beat_at).total_seconds())
        if attempts >= max_attempts:
            action = _file_fail(claim, job_id, rel, attempts=attempts, idle=idle)
        else:
            action = _file_resend(claim, job_id, root, rel, attempts=attempts, idle=idle)
        if action is not None:
            actions.append(action)
    return actions


def _file_fail(
    claim: QuerySet[IngestJobFile], job_id: int, rel: str, *, attempts: int, idle: int
) -> SweepAction | None:
    reason = (
        f"the worker preparing it stopped reporting on each of {attempts} attempts (last: no heartbeat for "
        f"{idle} s; killed, out of memory, or its machine lost); not sent again"
    )
    with transaction.atomic():  # the claim and the file's failure commit together
        result = ingest_jobs.ingest_job_file_fail(job_id=job_id, rel=rel, reason=reason) if claim.delete()[0] else None
    if result is None:
        return None
    logger.warning("ingest job=%s file failed as stale after attempts=%s", job_id, attempts)
    return SweepAction(LABEL, job_id, "failed", reason, part=rel)


def _file_resend(
    claim: QuerySet[IngestJobFile], job_id: int, root: str, rel: str, *, attempts: int, idle: int
) -> SweepAction | None:
    if not claim.update(beat_at=None, attempts=F("attempts") + 1):  # "sent, not started" again
        return None
    logger.warning("ingest job=%s file re-sent as stale attempt=%s", job_id, attempts + 1)
    ingest_jobs.ingest_job_file_send(job_id=job_id, root=root, rel=rel)
    reason = f"no heartbeat for {idle} s from the worker preparing it; sent again (attempt {attempts + 1})"
    return SweepAction(LABEL, job_id, "requeued", reason, part=rel)
