"""The sweeper's per-file part (``sources.services.ingest_sweep``), scripted: no broker, no worker.

The rows a broker run keeps (``IngestJobFile``) are written here as the db side writes them; what a
re-send would put on the queue is recorded instead of sent.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from core import jobs
from core.jobs import SweepAction, stale_runs_sweep
from sources.models import IngestJob, IngestJobFile, Source
from sources.services import ingest_jobs, ingest_sweep, prepare
from tests.sources.test_ingest_jobs import write_notes

pytestmark = pytest.mark.django_db

STALE = timedelta(minutes=5)
LONG_AGO = timedelta(minutes=20)


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, str]]:
    """(job id, file) of every file the sweeper sends again, instead of a chain on the queue."""
    calls: list[tuple[int, str]] = []
    monkeypatch.setattr(ingest_jobs, "ingest_job_file_send", lambda *, job_id, root, rel: calls.append((job_id, rel)))
    return calls


def processing_job(kb: Path, files: int, **beats: timedelta | None) -> IngestJob:
    """A running job whose files were all sent; ``beats`` gives a file's last beat as an age (None: not
    started), the others beat just now. The job itself beat just now."""
    write_notes(kb, files)
    job = ingest_jobs.ingest_job_create(target=kb)
    IngestJob.objects.filter(pk=job.pk).update(status=IngestJob.Status.RUNNING, stage=IngestJob.Stage.PROCESSING)
    now = timezone.now()
    for rel, _ in job.options["candidates"]:
        age = beats.get(rel.replace(".md", ""), timedelta(0))
        IngestJobFile.objects.create(job=job, path=rel, beat_at=None if age is None else now - age)
    job.refresh_from_db()
    return job


def row(job: IngestJob, rel: str) -> IngestJobFile | None:
    return IngestJobFile.objects.filter(job=job, path=rel).first()


def test_a_silent_file_of_a_live_job_is_sent_again_once(kb: Path, sent: list[tuple[int, str]]) -> None:
    job = processing_job(kb, 3, note1=LONG_AGO, note2=None)  # note0 beats, note2 is still queued
    actions = stale_runs_sweep(stale_after=STALE)
    assert [(a.run_id, a.part, a.action) for a in actions] == [(job.pk, "note1.md", "requeued")]
    assert "sent again (attempt 2)" in actions[0].reason
    assert sent == [(job.pk, "note1.md")]
    again = row(job, "note1.md")
    assert again is not None and again.attempts == 2 and again.beat_at is None  # sent, not started
    assert stale_runs_sweep(stale_after=STALE) == [] and len(sent) == 1  # a queued file is not lost
    job.refresh_from_db()
    assert job.status == IngestJob.Status.RUNNING and job.attempts == 0  # the job itself was left alone


def test_two_sweepers_never_both_send_a_file(kb: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A second sweeper runs while the first is between its listing and its claims: each file goes once."""
    job = processing_job(kb, 2, note0=LONG_AGO, note1=LONG_AGO)
    calls: list[str] = []
    nested: list[SweepAction] = []

    def send(*, job_id: int, root: str, rel: str) -> None:
        calls.append(rel)
        if not nested:  # the other sweeper, after the first claimed note0 and listed note1 as lost too
            nested.extend(ingest_sweep.ingest_files_sweep(cutoff=timezone.now() - STALE, max_attempts=3))

    monkeypatch.setattr(ingest_jobs, "ingest_job_file_send", send)
    first = ingest_sweep.ingest_files_sweep(cutoff=timezone.now() - STALE, max_attempts=3)
    assert sorted(calls) == ["note0.md", "note1.md"]
    assert [a.part for a in first] == ["note0.md"] and [a.part for a in nested] == ["note1.md"]
    assert {r.attempts for r in IngestJobFile.objects.filter(job=job)} == {2}


def test_a_file_silent_on_every_attempt_fails_alone_with_its_reason(kb: Path, sent: list[tuple[int, str]]) -> None:
    job = processing_job(kb, 2, note1=LONG_AGO)
    IngestJobFile.objects.filter(job=job, path="note1.md").update(attempts=3)
    actions = stale_runs_sweep(stale_after=STALE, max_attempts=3)
    assert [(a.part, a.action) for a in actions] == [("note1.md", "failed")] and sent == []
    job.refresh_from_db()
    assert job.status == IngestJob.Status.RUNNING and job.files_done == 1  # the job goes on
    (result,) = job.results
    assert result["path"] == "note1.md" and result["status"] == "failed"
    assert "stopped reporting on each of 3 attempts" in result["reason"]
    failed = Source.objects.get(path="note1.md")
    assert failed.status == Source.Status.FAILED and failed.reason == result["reason"]
    assert row(job, "note1.md") is None
    payload = prepare.source_prepare(root=job.root, rel="note0.md")
    ingest_jobs.ingest_job_file_store(job_id=job.pk, rel="note0.md", payload=payload)
    job.refresh_from_db()
    assert job.status == IngestJob.Status.SUCCEEDED and [r["status"] for r in job.results] == ["failed", "ingested"]
    assert not IngestJobFile.objects.filter(job=job).exists()


def test_a_silent_job_is_left_to_the_job_sweep(kb: Path, sent: list[tuple[int, str]]) -> None:
    """Every beat of the job stopped (the db worker, or all its workers, gone): a file's silence says nothing
    about that file, and the job is re-queued whole (in-process here, so it runs to the end at once)."""
    job = processing_job(kb, 2, note0=LONG_AGO, note1=LONG_AGO)
    IngestJob.objects.filter(pk=job.pk).update(heartbeat_at=timezone.now() - LONG_AGO)
    actions = stale_runs_sweep(stale_after=STALE)
    assert [(a.run_id, a.part, a.action) for a in actions] == [(job.pk, "", "requeued")] and sent == []
    job.refresh_from_db()
    assert job.status == IngestJob.Status.SUCCEEDED and job.attempts == 1
    assert not IngestJobFile.objects.filter(job=job).exists()  # each result took its row


def test_a_job_the_job_sweep_fails_stops_following_its_files(kb: Path, sent: list[tuple[int, str]]) -> None:
    job = processing_job(kb, 2, note0=LONG_AGO, note1=None)
    IngestJob.objects.filter(pk=job.pk).update(heartbeat_at=timezone.now() - LONG_AGO, attempts=3)
    actions = stale_runs_sweep(stale_after=STALE, max_attempts=3)
    assert [(a.run_id, a.part, a.action) for a in actions] == [(job.pk, "", "failed")] and sent == []
    assert not IngestJobFile.objects.filter(job=job).exists()


def test_files_of_a_job_still_checking_are_left_alone(kb: Path, sent: list[tuple[int, str]]) -> None:
    """A re-queued job being claimed again: its old rows are reset when it dispatches, not swept before."""
    job = processing_job(kb, 1, note0=LONG_AGO)
    IngestJob.objects.filter(pk=job.pk).update(stage=IngestJob.Stage.CHECKING)
    assert ingest_sweep.ingest_files_sweep(cutoff=timezone.now() - STALE, max_attempts=3) == [] and sent == []


def test_a_beat_names_its_file_and_a_late_one_changes_nothing(kb: Path) -> None:
    job = processing_job(kb, 2, note0=LONG_AGO, note1=None)
    ingest_jobs.ingest_job_beat(job_id=job.pk, rel="note1.md")
    started = row(job, "note1.md")
    assert started is not None and started.beat_at is not None
    silent = row(job, "note0.md")
    assert silent is not None and silent.beat_at is not None and timezone.now() - silent.beat_at > STALE
    payload = prepare.source_prepare(root=job.root, rel="note1.md")
    ingest_jobs.ingest_job_file_store(job_id=job.pk, rel="note1.md", payload=payload)
    ingest_jobs.ingest_job_beat(job_id=job.pk, rel="note1.md")  # the lost worker's beat, after the result
    assert row(job, "note1.md") is None
    IngestJob.objects.filter(pk=job.pk).update(status=IngestJob.Status.FAILED)
    ingest_jobs.ingest_job_beat(job_id=job.pk, rel="note0.md")  # a failed job takes no beat
    after = row(job, "note0.md")
    assert after is not None and after.beat_at == silent.beat_at


def test_each_dispatch_records_its_files_as_sent_and_counts_the_attempt(
    kb: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The broker path of ``ingest_job_run`` (the chains themselves recorded, not sent)."""
    write_notes(kb, 2)
    job = ingest_jobs.ingest_job_create(target=kb)
    dispatched: list[list[str]] = []
    monkeypatch.setattr(jobs, "is_eager", lambda: False)
    monkeypatch.setattr(ingest_jobs, "_dispatch", lambda job_id, root, rels: dispatched.append(rels))
    ingest_jobs.ingest_job_run(job_id=job.pk)
    rows = {r.path: (r.attempts, r.beat_at) for r in IngestJobFile.objects.filter(job=job)}
    assert dispatched == [["note0.md", "note1.md"]] and rows == {"note0.md": (1, None), "note1.md": (1, None)}
    ingest_jobs.ingest_job_beat(job_id=job.pk, rel="note0.md")
    # The job went silent and the job sweep put it back (pending): the next attempt sends both files again.
    IngestJob.objects.filter(pk=job.pk).update(status=IngestJob.Status.PENDING)
    ingest_jobs.ingest_job_run(job_id=job.pk)
    rows = {r.path: (r.attempts, r.beat_at) for r in IngestJobFile.objects.filter(job=job)}
    assert rows == {"note0.md": (2, None), "note1.md": (2, None)} and len(dispatched) == 2
