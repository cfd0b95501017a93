"""The scheduled folder sync through a real Redis broker: Celery beat in the db worker runs
``sources.tasks.sync_bound_folders`` every sync.interval, and its ingest jobs run on the real workers.

Needs Redis at 127.0.0.1:6379 (or FOUNDRY_TEST_REDIS_URL); see tests/broker.py.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sources.models import IngestJob, Source
from sources.services.sync import collection_bind
from tests.broker import Worker, redis_or_skip, worker_env, worker_pool
from tests.sources.test_ingest import index_agrees
from tests.sources.test_tasks_broker import clean_index, fast_config  # noqa: F401  (fixtures)

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module")
def workers(tmp_path_factory: pytest.TempPathFactory, django_db_setup: Any) -> Iterator[dict[str, Worker]]:
    """A compute worker and a db worker whose beat syncs bound folders every 2 seconds."""
    redis_or_skip()
    home = tmp_path_factory.mktemp("sync-broker-home")
    env = worker_env(
        home, config="ingest:\n  summary_model: none\nembedding:\n  context_model: none\nsync:\n  interval: 2s\n"
    )
    with worker_pool(home, env) as pool:
        yield pool


def wait_for(condition: Any, what: str, workers: dict[str, Worker], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(
                f"{what} not seen after {timeout}s\n{workers['db'].tail()}\n{workers['compute'].tail()}"
            )
        time.sleep(0.5)


def ingested(folder: Path) -> set[str]:
    return set(Source.objects.filter(root=str(folder), status="ingested").values_list("path", flat=True))


def test_beat_syncs_a_bound_folder_on_schedule(
    workers: dict[str, Worker], tmp_path: Path, fast_config: None, clean_index: None
) -> None:
    folder = tmp_path / "shared-drive"
    folder.mkdir()
    for n in range(3):
        (folder / f"valve-{n}.txt").write_text(f"Relief valve V-{n} opens at {n + 2} bar.\n")
    collection_bind(collection="plant", folder=folder)  # no sync is started here: only the schedule runs one

    wait_for(lambda: ingested(folder) == {"valve-0.txt", "valve-1.txt", "valve-2.txt"}, "first sync", workers)
    assert "sources.tasks.sync_bound_folders" in workers["db"].since_start()

    (folder / "valve-3.txt").write_text("Relief valve V-3 opens at 5 bar.\n")
    (folder / "valve-0.txt").unlink()
    wait_for(lambda: ingested(folder) == {"valve-1.txt", "valve-2.txt", "valve-3.txt"}, "second sync", workers)
    wait_for(lambda: not IngestJob.objects.filter(status__in=["pending", "running"]).exists(), "jobs done", workers)

    jobs = IngestJob.objects.filter(target=str(folder)).order_by("pk")
    assert jobs.count() >= 2 and {j.status for j in jobs} == {"succeeded"}
    # Rounds that came while a job was still running did not start another: each file was ingested once
    # per change, never twice.
    ingests = [r["path"] for j in jobs for r in j.results if r["status"] == "ingested"]
    assert sorted(ingests) == ["valve-0.txt", "valve-1.txt", "valve-2.txt", "valve-3.txt"]
    index_agrees()
