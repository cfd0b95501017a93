"""Tasks by name: services enqueue the tasks that import them without importing them back."""

from __future__ import annotations

import pytest
from celery import current_app

from core import jobs

# Every name a service enqueues, and the Celery task (queue routing goes by these names) it must be.
ENQUEUED = {
    "ingest.run": "sources.tasks.run_ingest_job",
    "ingest.prepare": "sources.tasks.prepare_source",
    "ingest.store": "sources.tasks.store_source",
    "ingest.file_failed": "sources.tasks.ingest_file_failed",
    "generation.compute": "generation.tasks.generate_compute",
    "generation.store": "generation.tasks.generate_store",
    "generation.failed": "generation.tasks.generate_failed",
}


@pytest.mark.parametrize("name, task_name", ENQUEUED.items())
def test_each_enqueued_name_is_its_task(name: str, task_name: str) -> None:
    assert jobs.registered_task(name).name == task_name


def test_a_miss_loads_the_tasks_modules_then_names_what_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    loads = []
    real_load = current_app.autodiscover_tasks
    monkeypatch.setattr(current_app, "autodiscover_tasks", lambda **kw: loads.append(kw) or real_load(**kw))
    monkeypatch.setattr(jobs, "_TASKS", {})

    @jobs.register_task("test.echo")
    def echo(value: int) -> int:
        return value

    assert jobs.registered_task("test.echo") is echo
    assert loads == []  # registered already: nothing is loaded
    with pytest.raises(LookupError, match=r"no task is registered as 'test\.missing'"):
        jobs.registered_task("test.missing")
    assert loads == [{"force": True}]
