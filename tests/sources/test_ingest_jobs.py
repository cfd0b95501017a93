"""Ingest jobs in-process (no broker): progress, idempotent store, errback path, retry, sweeper."""

from __future__ import annotations

import json
from datetime import timedelta
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from core.jobs import stale_runs_sweep
from sources.models import Chunk, IngestJob, Source
from sources.services import ingest, ingest_jobs, prepare
from sources.services.ingest_jobs import JobStateError
from tests.broker import broker_mode, redis_flush, redis_or_skip
from tests.sources.test_ingest import index_agrees

pytestmark = pytest.mark.django_db


def write_notes(kb: Path, count: int = 3) -> None:
    for i in range(count):
        text = f"# Note {i}\n\nPump {i} runs at {i + 1} bar.\n\n## Alarm\n\nAlarm {i} is red.\n"
        (kb / f"note{i}.md").write_text(text)


def test_job_records_progress_and_report(kb: Path) -> None:
    write_notes(kb)
    (kb / "archive.zip").write_bytes(b"PK\x05\x06" + b"\x00" * 18)
    seen: list[str] = []
    report = ingest_jobs.knowledge_base_ingest(target=kb, progress=lambda r: seen.append(f"{r.path}:{r.status}"))
    job = IngestJob.objects.get()
    assert job.status == IngestJob.Status.SUCCEEDED and job.stage == IngestJob.Stage.DONE
    assert (job.files_total, job.files_done) == (4, 4)
    assert job.chunks_done == Chunk.objects.count() == report.as_dict()["chunks"]
    assert job.attempts == 1 and job.started_at and job.finished_at
    assert sorted(seen) == ["archive.zip:skipped", "note0.md:ingested", "note1.md:ingested", "note2.md:ingested"]
    assert [f.path for f in report.files] == ["archive.zip", "note0.md", "note1.md", "note2.md"]


def test_cli_json_shape_unchanged(kb: Path) -> None:
    write_notes(kb, 1)
    out = StringIO()
    call_command("foundry", "ingest", str(kb), "--json", stdout=out)
    data = json.loads(out.getvalue())
    assert list(data) == ["ingested", "unchanged", "skipped", "failed", "removed", "chunks", "files"]
    assert data["files"] == [{"path": "note0.md", "status": "ingested", "reason": "", "chunks": 2}]


def running_job(kb: Path) -> IngestJob:
    job = ingest_jobs.ingest_job_create(target=kb)
    IngestJob.objects.filter(pk=job.pk).update(status=IngestJob.Status.RUNNING)
    job.refresh_from_db()
    return job


def test_store_is_idempotent(kb: Path) -> None:
    write_notes(kb, 2)
    job = running_job(kb)
    payload = prepare.source_prepare(root=str(kb), rel="note0.md")
    first = ingest_jobs.ingest_job_file_store(job_id=job.pk, rel="note0.md", payload=payload)
    again = ingest_jobs.ingest_job_file_store(job_id=job.pk, rel="note0.md", payload=payload)
    failed_late = ingest_jobs.ingest_job_file_fail(job_id=job.pk, rel="note0.md", reason="late errback")
    assert first is not None and first.status == "ingested" and again is None and failed_late is None
    job.refresh_from_db()
    assert job.files_done == 1 and len(job.results) == 1
    assert Chunk.objects.filter(source__path="note0.md").count() == first.chunks
    assert (
        ingest.source_store_prepared(
            root=str(kb), rel="note0.md", collection_id=job.collection_id, payload=payload
        ).status
        == "unchanged"
    )
    assert ingest_jobs.ingest_job_file_store(job_id=999999, rel="x", payload=payload) is None
    index_agrees()


def test_payload_of_another_release_fails_the_file_and_keeps_the_stored_version(kb: Path) -> None:
    write_notes(kb, 1)
    job = running_job(kb)
    payload = prepare.source_prepare(root=str(kb), rel="note0.md")
    assert ingest_jobs.ingest_job_file_store(job_id=job.pk, rel="note0.md", payload=payload).status == "ingested"
    old = {key: value for key, value in payload.items() if not key.startswith("window_")}
    old["v"], old["sha256"] = 2, "0" * 64  # a release before chunks carried ocr_confidence
    for chunk in old["chunks"]:
        del chunk["ocr_confidence"]
    result = ingest.source_store_prepared(root=str(kb), rel="note0.md", collection_id=job.collection_id, payload=old)
    assert result.status == "failed"
    reads = f"payload version 2, but this one reads {prepare.PAYLOAD_VERSION}; every worker must run the same Foundry"
    assert reads in result.reason
    assert Chunk.objects.filter(source__path="note0.md").count() > 0  # the stored version stays
    index_agrees()


def test_errback_failure_then_store_finishes_job(kb: Path) -> None:
    write_notes(kb, 2)
    job = running_job(kb)
    ingest_jobs.ingest_job_file_fail(job_id=job.pk, rel="note1.md", reason="RuntimeError: boom")
    ingest_jobs.ingest_job_file_store(
        job_id=job.pk, rel="note0.md", payload=prepare.source_prepare(root=str(kb), rel="note0.md")
    )
    job.refresh_from_db()
    assert job.status == IngestJob.Status.SUCCEEDED
    assert Source.objects.get(path="note1.md").reason == "RuntimeError: boom"


def test_unexpected_extractor_crash_fails_that_file_only(kb: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_notes(kb, 3)
    real_extract = prepare.extract

    def crashing(path: Path, data: bytes) -> Any:
        if path.name == "note1.md":
            raise RuntimeError("extractor crashed")
        return real_extract(path, data)

    monkeypatch.setattr(prepare, "extract", crashing)
    report = {f.path: f for f in ingest_jobs.knowledge_base_ingest(target=kb).files}
    assert report["note1.md"].status == "failed"
    assert report["note1.md"].reason.endswith("RuntimeError: extractor crashed")
    assert report["note0.md"].status == report["note2.md"].status == "ingested"
    index_agrees()


def test_retry_redoes_failed_files(kb: Path) -> None:
    write_notes(kb, 1)
    (kb / "bad.json").write_text("{broken")
    ingest_jobs.knowledge_base_ingest(target=kb)
    job = IngestJob.objects.get()
    (kb / "bad.json").write_text('{"vcc": "3.3 V"}')
    job = ingest_jobs.ingest_job_retry(job_id=job.pk)
    assert job.status == IngestJob.Status.SUCCEEDED
    statuses = {r["path"]: r["status"] for r in job.results}
    assert statuses == {"note0.md": "ingested", "bad.json": "ingested"}
    assert job.files_done == 2
    with pytest.raises(JobStateError, match="nothing to retry"):
        ingest_jobs.ingest_job_retry(job_id=job.pk)


def test_retry_refuses_unfinished_or_unknown_job(kb: Path) -> None:
    write_notes(kb, 1)
    job = ingest_jobs.ingest_job_create(target=kb)
    with pytest.raises(JobStateError, match="is pending"):
        ingest_jobs.ingest_job_retry(job_id=job.pk)
    with pytest.raises(JobStateError, match="no ingest job"):
        ingest_jobs.ingest_job_retry(job_id=job.pk + 100)


def test_run_claims_only_pending_jobs(kb: Path) -> None:
    write_notes(kb, 1)
    job = running_job(kb)
    ingest_jobs.ingest_job_run(job_id=job.pk)  # a re-delivered run message: must do nothing
    job.refresh_from_db()
    assert job.files_done == 0 and not Source.objects.exists()


def test_sweeper_requeues_then_fails_stale_jobs(kb: Path) -> None:
    write_notes(kb, 2)
    stale = running_job(kb)
    hopeless = running_job(kb)
    queued = ingest_jobs.ingest_job_create(target=kb)  # pending, fresh heartbeat: left alone
    old = timezone.now() - timedelta(hours=2)
    IngestJob.objects.filter(pk__in=[stale.pk, hopeless.pk]).update(heartbeat_at=old)
    IngestJob.objects.filter(pk=hopeless.pk).update(attempts=3)
    actions = {a.run_id: a for a in stale_runs_sweep(stale_after=timedelta(minutes=5), max_attempts=3)}
    assert set(actions) == {stale.pk, hopeless.pk}
    assert actions[stale.pk].action == "requeued" and actions[hopeless.pk].action == "failed"
    stale.refresh_from_db(), hopeless.refresh_from_db(), queued.refresh_from_db()
    # Without a broker the re-queued job runs at once, to the end.
    assert stale.status == IngestJob.Status.SUCCEEDED and stale.files_done == 2
    assert hopeless.status == IngestJob.Status.FAILED and "no progress for" in hopeless.error
    assert queued.status == IngestJob.Status.PENDING
    index_agrees()


@pytest.mark.integration  # a real Redis: where the compute workers read what the sweeper decided
def test_prepares_still_queued_for_a_job_the_sweeper_failed_are_dropped_until_retry(
    kb: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    redis_or_skip()
    write_notes(kb, 2)
    job = running_job(kb)
    payload = prepare.source_prepare(root=str(kb), rel="note0.md")
    ingest_jobs.ingest_job_file_store(job_id=job.pk, rel="note0.md", payload=payload)
    IngestJob.objects.filter(pk=job.pk).update(attempts=3, heartbeat_at=timezone.now() - timedelta(hours=2))
    monkeypatch.setattr(ingest_jobs, "ingest_job_enqueue", lambda job_id: None)  # no worker in this test
    with broker_mode():
        redis_flush()
        stale_runs_sweep(stale_after=timedelta(minutes=5), max_attempts=3)
        assert IngestJob.objects.get(pk=job.pk).status == IngestJob.Status.FAILED
        late = ingest_jobs.ingest_job_file_prepare(root=str(kb), rel="note1.md", job_id=job.pk)
        assert late["status"] == "duplicate"  # dropped before any embedding
        ingest_jobs.ingest_job_retry(job_id=job.pk)
        again = ingest_jobs.ingest_job_file_prepare(root=str(kb), rel="note1.md", job_id=job.pk)
    assert again["status"] == "prepared"  # retry lets the file be done again


def test_a_late_file_that_completes_a_job_the_sweeper_failed_finishes_it(kb: Path) -> None:
    write_notes(kb, 1)
    job = running_job(kb)
    payload = prepare.source_prepare(root=str(kb), rel="note0.md")  # computed before the sweeper gave up
    IngestJob.objects.filter(pk=job.pk).update(attempts=3, heartbeat_at=timezone.now() - timedelta(hours=2))
    stale_runs_sweep(stale_after=timedelta(minutes=5), max_attempts=3)
    assert IngestJob.objects.get(pk=job.pk).status == IngestJob.Status.FAILED
    ingest_jobs.ingest_job_file_store(job_id=job.pk, rel="note0.md", payload=payload)
    job.refresh_from_db()
    assert job.status == IngestJob.Status.SUCCEEDED and job.error == "" and job.files_done == 1


def test_sweeper_waits_while_another_run_progresses(kb: Path) -> None:
    write_notes(kb, 1)
    quiet = running_job(kb)
    running_job(kb)  # heartbeat now: the workers are busy with it
    IngestJob.objects.filter(pk=quiet.pk).update(heartbeat_at=timezone.now() - timedelta(hours=2))
    assert stale_runs_sweep(stale_after=timedelta(minutes=5)) == []
    quiet.refresh_from_db()
    assert quiet.status == IngestJob.Status.RUNNING


@pytest.mark.integration  # a real Redis: the sweeper reads what waits in the broker's queues
def test_with_a_broker_a_quiet_run_is_lost_once_nothing_waits_in_the_queues(
    kb: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another run making progress no longer hides a lost one: with the queues empty, nothing is queued behind it."""
    from sources.tasks import run_ingest_job

    redis_or_skip()
    write_notes(kb, 1)
    quiet = running_job(kb)
    running_job(kb)  # heartbeat now: a worker is busy with it
    IngestJob.objects.filter(pk=quiet.pk).update(heartbeat_at=timezone.now() - timedelta(hours=2))
    requeued: list[int] = []
    monkeypatch.setattr(ingest_jobs, "ingest_job_enqueue", lambda job_id: requeued.append(job_id))
    with broker_mode():
        redis_flush()
        run_ingest_job.apply_async((0,), queue="db")  # a message waits: the quiet job may be behind it
        assert stale_runs_sweep(stale_after=timedelta(minutes=5)) == []
        redis_flush()  # the queues are empty: the quiet job is lost
        actions = stale_runs_sweep(stale_after=timedelta(minutes=5))
    assert [(a.run_id, a.action) for a in actions] == [(quiet.pk, "requeued")] and requeued == [quiet.pk]


def test_jobs_command_lists_failures_with_reasons(kb: Path) -> None:
    (kb / "bad.json").write_text("{broken")
    ingest_jobs.knowledge_base_ingest(target=kb)
    out = StringIO()
    call_command("foundry", "jobs", stdout=out)
    assert "succeeded" in out.getvalue() and "bad.json: invalid JSON" in out.getvalue()
    out = StringIO()
    with pytest.raises(SystemExit) as exited:  # in-process, the retry ran at once and the file failed again
        call_command("foundry", "jobs", "retry", str(IngestJob.objects.get().pk), stdout=out)
    assert exited.value.code == 1
    assert "retried: succeeded, 1/1 files done, 1 failed" in out.getvalue() and "bad.json" in out.getvalue()
    (kb / "bad.json").write_text('{"vcc": "3.3 V"}')
    call_command("foundry", "jobs", "retry", str(IngestJob.objects.get().pk), stdout=out)  # exit 0: fixed
    assert "retried: succeeded, 1/1 files done, 0 failed" in out.getvalue()
    with pytest.raises(CommandError, match="--limit: must be 1 or more, not 0"):
        call_command("foundry", "jobs", "--limit", "0")
