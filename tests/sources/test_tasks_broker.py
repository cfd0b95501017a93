"""Ingest through a real Redis broker and real Celery workers (subprocesses), one per queue.

Needs Redis at 127.0.0.1:6379 (or FOUNDRY_TEST_REDIS_URL); uses database 14, flushed before and after. Skips
with a message when Redis is unreachable, except in CI (CI=true), where it fails (see tests/broker.py).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from sources import vectorstore
from sources.models import Chunk, IngestJob, IngestJobFile, Source
from sources.services import ingest, ingest_jobs
from tests.broker import Worker, broker_mode, redis_or_skip, start_all, worker_env, worker_pool
from tests.conftest import make_pdf
from tests.sources.test_ingest import MODEL, index_agrees

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

STALE_SECONDS = 20  # longer than a worker restart plus the embedding model's load time on 2 busy cores
SWEEP_SECONDS = 2
SLOW_SECONDS = 25  # how long a `slow-*` file takes to prepare (tests/broker_worker_app.py): past the stale window


@pytest.fixture(scope="module")
def workers(tmp_path_factory: pytest.TempPathFactory, django_db_setup: Any) -> Iterator[dict[str, Worker]]:
    """A compute worker (no database at all) and a db worker with the sweeper schedule."""
    redis_or_skip()
    home = tmp_path_factory.mktemp("broker-home")
    env = worker_env(
        home,
        config="ingest:\n  summary_model: none\nembedding:\n  context_model: none\n",
        FOUNDRY_JOB_STALE_SECONDS=str(STALE_SECONDS),
        FOUNDRY_HEARTBEAT_SECONDS="2",
        FOUNDRY_SWEEP_INTERVAL=str(SWEEP_SECONDS),
        FOUNDRY_TEST_SLOW_SECONDS=str(SLOW_SECONDS),
        FOUNDRY_TASK_MAX_DELIVERIES="2",
        FOUNDRY_TASK_RETRY_BACKOFF="1",
    )
    with worker_pool(home, env) as pool:
        yield pool


@pytest.fixture
def fast_config(foundry_config: Any) -> None:
    """The same pipeline settings the workers read from their foundry.yaml."""
    foundry_config(ingest={"summary_model": "none"}, embedding={"context_model": "none"})


@pytest.fixture
def clean_index() -> Iterator[None]:
    """Transaction tests flush model tables only, so vec0 rows outlive them: start and end without any."""
    drop_index()
    yield
    drop_index()


def drop_index() -> None:
    for source_id in Source.objects.values_list("pk", flat=True):
        ingest.source_delete(source_id=source_id)
    with connection.cursor() as cur:
        for table in vectorstore.all_tables() + vectorstore.all_tables(kind="windows"):
            cur.execute(f"DROP TABLE {table}")


def snapshot() -> dict[str, Any]:
    """Everything ingest wrote, keyed by path and ordinal, with the raw float32 vectors."""
    with connection.cursor() as cur:
        cur.execute(f"SELECT chunk_id, embedding FROM {vectorstore.table_name(MODEL)}")
        vectors = dict(cur.fetchall())
        cur.execute(f"SELECT window_id, embedding FROM {vectorstore.windows_table_name(MODEL)}")
        windows: dict[int, list[bytes]] = {}
        for unit, blob in sorted(cur.fetchall()):
            windows.setdefault(unit // vectorstore.WINDOW_SLOTS, []).append(bytes(blob))
    return {
        (c.source.path, c.ordinal): (
            c.source.title,
            c.source.kind,
            c.source.sha256,
            c.text,
            c.heading,
            c.page_start,
            c.page_end,
            c.line_start,
            c.line_end,
            c.token_count,
            c.context,
            bytes(vectors[c.pk]),
            windows.get(c.pk, []),
        )
        for c in Chunk.objects.select_related("source")
    }


def write_mixed_kb(kb: Path) -> None:
    (kb / "manual.md").write_text("# Manual\n\n## Power\n\nThe gateway needs 24 V DC.\n\n## Bus\n\nUp to 8 sensors.\n")
    (kb / "notes.txt").write_text(
        "Firmware 2.4.1 fixes the alarm hysteresis bug. Update before May.\n\nMQTT over TLS arrives in 2.5.\n"
    )
    (kb / "spec.json").write_text('{"model": "AX-200", "electrical": {"vcc": "3.3 V", "current": "120 mA"}}')
    make_pdf(kb / "sheet.pdf", [("1 General", "The AX-200 is a sensor gateway."), ("2 Power", "VCC = 5 V.")])
    (kb / "bad.json").write_text("{broken")


def wait_job(job_id: int, timeout: float, workers: dict[str, Worker]) -> IngestJob:
    job = ingest_jobs.ingest_job_wait(job_id=job_id, timeout=timeout)
    assert job.is_finished, (
        f"job {job_id} not finished after {timeout}s: {job.status} {job.files_done}/"
        f"{job.files_total}\n{workers['compute'].tail()}\n{workers['db'].tail()}"
    )
    return job


def test_broker_ingest_equals_in_process_ingest(
    workers: dict[str, Worker], kb: Path, fast_config: None, clean_index: None
) -> None:
    write_mixed_kb(kb)
    eager = ingest_jobs.knowledge_base_ingest(target=kb).as_dict()
    expected = snapshot()
    for source_id in Source.objects.values_list("pk", flat=True):
        ingest.source_delete(source_id=source_id)
    with broker_mode():
        brokered = ingest_jobs.knowledge_base_ingest(target=kb).as_dict()
    assert brokered == eager
    assert eager["ingested"] == 4 and eager["failed"] == 1
    assert snapshot() == expected
    index_agrees()


FILES = 40


def test_kill_workers_mid_ingest_then_recover(
    workers: dict[str, Worker], kb: Path, fast_config: None, clean_index: None
) -> None:
    paragraph = "The pump station {i} reports pressure, flow and temperature to the gateway every {n} seconds."
    for n in range(FILES):
        body = "\n\n".join(
            f"## Part {p}\n\n" + " ".join(paragraph.format(i=i, n=n) for i in range(5)) for p in range(2)
        )
        (kb / f"station-{n:03}.md").write_text(f"# Station {n}\n\n{body}\n")
    with broker_mode():
        job = ingest_jobs.ingest_job_create(target=kb)
        ingest_jobs.ingest_job_enqueue(job_id=job.pk)
        while (job := IngestJob.objects.get(pk=job.pk)).files_done < FILES // 5:
            assert not job.is_finished
            time.sleep(0.05)
        for worker in workers.values():
            worker.kill()
        killed_at = time.monotonic()
        done_at_kill = IngestJob.objects.get(pk=job.pk).files_done
        assert done_at_kill < job.files_total, "ingest finished before the kill; make it larger"
        start_all(workers)
        job = wait_job(job.pk, 150, workers)
        recovery = time.monotonic() - killed_at
    print(
        f"\nkilled at {done_at_kill}/{job.files_total} files; complete {recovery:.1f}s after the kill, "
        f"attempts={job.attempts}"
    )
    assert job.status == IngestJob.Status.SUCCEEDED
    paths = [r["path"] for r in job.results]
    assert len(paths) == len(set(paths)) == FILES and {r["status"] for r in job.results} == {"ingested"}
    assert Source.objects.filter(status="ingested").count() == FILES
    for source in Source.objects.all():
        ordinals = list(source.chunks.values_list("ordinal", flat=True))
        assert ordinals == list(range(source.chunk_count)) and source.chunk_count > 1
    assert job.chunks_done == Chunk.objects.count()
    index_agrees()  # chunk rows, FTS rows and vectors are the same set: no orphan vectors


def test_poison_files_fail_alone_with_reasons(
    workers: dict[str, Worker], kb: Path, fast_config: None, clean_index: None
) -> None:
    for n in range(4):
        (kb / f"good-{n}.txt").write_text(f"Valve {n} opens at {n + 1} bar.\n")
    (kb / "poison-crash.txt").write_text("This file kills the worker process.\n")
    (kb / "poison-raise.txt").write_text("This file makes the extractor raise.\n")
    with broker_mode():
        job = ingest_jobs.ingest_job_create(target=kb)
        ingest_jobs.ingest_job_enqueue(job_id=job.pk)
        job = wait_job(job.pk, 120, workers)
    results = {r["path"]: r for r in job.results}
    assert job.status == IngestJob.Status.SUCCEEDED
    assert [results[f"good-{n}.txt"]["status"] for n in range(4)] == ["ingested"] * 4
    assert results["poison-raise.txt"]["status"] == "failed"
    assert results["poison-raise.txt"]["reason"].endswith("RuntimeError: extractor crashed on purpose")
    assert results["poison-crash.txt"]["status"] == "failed"
    assert results["poison-crash.txt"]["reason"].startswith("PoisonTask: the worker process died 2 times")
    assert Source.objects.get(path="poison-crash.txt").status == Source.Status.FAILED
    index_agrees()


def starts(workers: dict[str, Worker], name: str) -> int:
    """How many times a compute worker began to prepare the `slow-*` file ``name``."""
    log = workers["compute"].home / "starts.log"
    return log.read_text().splitlines().count(name) if log.exists() else 0


def test_a_compute_worker_killed_mid_file_has_that_file_redone_exactly_once(
    workers: dict[str, Worker], kb: Path, fast_config: None, clean_index: None
) -> None:
    """The killed worker's message stays unacknowledged in Redis (visibility timeout: over half an
    hour); the job's silence brings the sweeper, which sends the file again, once."""
    for name in ("a-note.txt", "b-note.txt"):
        (kb / name).write_text(f"{name}: the pump runs at 1450 rpm.\n")
    (kb / "slow-c.txt").write_text("The slow file: valve V2 closes at 6 bar.\n\nIt opens again at 4 bar.\n")
    with broker_mode():
        job = ingest_jobs.ingest_job_create(target=kb)
        ingest_jobs.ingest_job_enqueue(job_id=job.pk)
        deadline = time.monotonic() + 120
        while starts(workers, "slow-c.txt") == 0:  # the compute worker is inside the file
            assert time.monotonic() < deadline, workers["compute"].tail()
            time.sleep(0.1)
        workers["compute"].kill()
        killed_at = time.monotonic()
        start_all({"compute": workers["compute"]})  # as a supervisor restarts it
        # Bound: silence noticed within the stale window plus one sweep, then the redo itself
        # (the restarted worker loads the embedding model first: allow a minute for that).
        job = wait_job(job.pk, STALE_SECONDS + SWEEP_SECONDS + SLOW_SECONDS + 60, workers)
        recovery = time.monotonic() - killed_at
    print(f"\nfile killed mid-prepare recorded {recovery:.1f}s after the kill, attempts={job.attempts}")
    assert job.status == IngestJob.Status.SUCCEEDED and job.attempts == 2
    assert starts(workers, "slow-c.txt") == 2  # the killed start and one redo
    paths = [r["path"] for r in job.results]
    assert sorted(paths) == ["a-note.txt", "b-note.txt", "slow-c.txt"]
    assert {r["status"] for r in job.results} == {"ingested"}
    slow = Source.objects.get(path="slow-c.txt")
    assert list(slow.chunks.values_list("ordinal", flat=True)) == list(range(slow.chunk_count))
    assert job.chunks_done == Chunk.objects.count()
    index_agrees()


def test_a_file_lost_while_its_job_goes_on_is_redone_alone_without_waiting_for_the_job(
    workers: dict[str, Worker], kb: Path, fast_config: None, clean_index: None
) -> None:
    """Two compute workers, one slow file each; one worker is killed. The other file, slower than the stale
    window, keeps the job alive: the sweeper sends just the silent file again, and the job is never
    re-queued (attempts stays 1)."""
    names = ["slow-a.txt", "slow-b.txt"]
    (kb / names[0]).write_text("The first slow file: pump P1 runs at 1450 rpm.\n")
    (kb / names[1]).write_text("The second slow file: valve V3 closes at 5 bar.\n")
    other = Worker("compute", workers["compute"].env, workers["compute"].home, name="compute-2")
    try:
        start_all({"compute-2": other})
        with broker_mode():
            job = ingest_jobs.ingest_job_create(target=kb)
            ingest_jobs.ingest_job_enqueue(job_id=job.pk)
            deadline = time.monotonic() + 120
            while any(starts(workers, name) == 0 for name in names):  # each worker is inside its file
                assert time.monotonic() < deadline, workers["compute"].tail() + other.tail()
                time.sleep(0.1)
            workers["compute"].kill()
            start_all({"compute": workers["compute"]})  # as a supervisor restarts it
            job = wait_job(job.pk, 2 * SLOW_SECONDS + STALE_SECONDS + 90, workers)
    finally:
        other.stop()
    assert job.status == IngestJob.Status.SUCCEEDED and job.attempts == 1
    assert sorted(starts(workers, name) for name in names) == [1, 2]  # the lost file once more, the other not
    assert sorted(r["path"] for r in job.results) == names and {r["status"] for r in job.results} == {"ingested"}
    assert not IngestJobFile.objects.filter(job_id=job.pk).exists()
    assert job.chunks_done == Chunk.objects.count()
    index_agrees()


def test_a_file_slower_than_the_stale_window_is_never_redone(
    workers: dict[str, Worker], kb: Path, fast_config: None, clean_index: None
) -> None:
    """The prepare outlasts the stale window; its heartbeat thread keeps the job alive, so the
    sweeper leaves it alone and the file is prepared once."""
    assert SLOW_SECONDS > STALE_SECONDS + SWEEP_SECONDS
    (kb / "slow-d.txt").write_text("A large file: the heater H4 draws 2 kW.\n")
    with broker_mode():
        job = ingest_jobs.ingest_job_create(target=kb)
        ingest_jobs.ingest_job_enqueue(job_id=job.pk)
        job = wait_job(job.pk, SLOW_SECONDS + 90, workers)
    assert job.status == IngestJob.Status.SUCCEEDED and job.attempts == 1
    assert starts(workers, "slow-d.txt") == 1
    assert [r["status"] for r in job.results] == ["ingested"]
