"""Without a broker, the generate page and ``POST /api/v1/generate`` answer before the run has finished.

The run executes on the web process's worker thread (``generation.background``): the scripted model
holds the run in its "generate" stage until the test lets it go, so the response is seen while the
run is still running, whatever the machine's speed.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from concurrent.futures import Future
from typing import Any

import pytest
from django.contrib.auth.models import User

from core import jobs
from generation import background
from generation.models import GenerationRun
from tests.conftest import ScriptedLLM, login
from tests.specs.test_generate_web import REPLY, TOPIC, api, ready  # noqa: F401 (fixture)

pytestmark = pytest.mark.django_db(transaction=True)  # the worker thread reads what the request committed


@pytest.fixture
def people(make_user: Any) -> dict[str, Any]:
    return {"alice": make_user("alice"), "bob": make_user("bob")}


@pytest.fixture
def held(ready: ScriptedLLM, run_threads: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:  # noqa: F811
    """The scripted model waits in its call until ``release`` is set; ``futures`` are the submitted runs."""
    assert jobs.is_eager()  # no broker: the case this file is about
    entered, release = threading.Event(), threading.Event()
    futures: list[Future] = []

    def reply(messages: list[dict]) -> str:
        entered.set()
        if not release.wait(timeout=120):
            raise RuntimeError("the test never released the scripted model")
        return REPLY

    ready.reply = reply
    submit = background.run_submit
    monkeypatch.setattr(background, "run_submit", lambda run_id: futures.append(submit(run_id)) or futures[-1])
    state = {"entered": entered, "release": release, "futures": futures}
    yield state
    release.set()  # never leave a worker thread waiting
    for future in futures:
        future.result(timeout=120)


def test_api_answers_202_while_the_run_is_still_running(held: dict[str, Any], people: dict) -> None:
    alice = api("alice")
    started = alice.post("/api/v1/generate", json.dumps({"topic": TOPIC}), content_type="application/json")
    assert started.status_code == 202 and started.json()["status"] in ("pending", "running")
    assert held["entered"].wait(timeout=120), "the run never reached the model"
    run = alice.get(started.json()["url"]).json()
    assert run["status"] == "running" and run["stage"] == "generate" and run["download"] is None
    held["release"].set()
    held["futures"][0].result(timeout=120)
    run = alice.get(started.json()["url"]).json()
    assert run["status"] == "succeeded" and run["stage"] == "done" and run["download"]


def test_generate_page_redirects_at_once_and_the_run_page_follows_the_stages(
    held: dict[str, Any], people: dict
) -> None:
    client = login(people["alice"])
    response = client.post("/generate/", {"topic": TOPIC, "feature": "wiring-guide"})
    run = GenerationRun.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/runs/{run.pk}/"
    assert held["entered"].wait(timeout=120)
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert '<span class="badge running" id="run-status">Running</span>' in page
    assert '<li data-stage="retrieval" class="past">Retrieving sources</li>' in page
    assert '<li data-stage="generate" class="active" aria-current="step">Writing the document</li>' in page
    assert '<noscript><meta http-equiv="refresh" content="3"></noscript>' in page and "Download .md" not in page
    assert client.get(f"/runs/{run.pk}/status").json() == {
        "id": run.pk,
        "status": "running",
        "label": "Running",
        "stage": "generate",
        "done": False,
    }
    held["release"].set()
    held["futures"][0].result(timeout=120)
    status = client.get(f"/runs/{run.pk}/status").json()
    assert status["status"] == "succeeded" and status["done"] is True
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert '<li data-stage="done" class="active" aria-current="step">Done</li>' in page and "Download .md" in page
    assert "http-equiv" not in page


def test_a_run_that_fails_in_the_background_is_recorded(
    ready: ScriptedLLM,
    run_threads: None,  # noqa: F811
    people: dict,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    futures: list[Future] = []
    submit = background.run_submit
    monkeypatch.setattr(background, "run_submit", lambda run_id: futures.append(submit(run_id)) or futures[-1])

    def broken(messages: list[dict]) -> str:
        raise ValueError("scripted failure")

    ready.reply = broken
    response = login(people["alice"]).post("/generate/", {"topic": TOPIC, "feature": "wiring-guide"})
    assert response.status_code == 302
    futures[0].result(timeout=120)  # the thread logs the failure; it raises nothing
    run = GenerationRun.objects.get()
    assert run.status == "failed" and "scripted failure" in run.error["message"], run.error


def test_a_run_left_by_a_stopped_process_is_picked_up_by_the_sweeper(ready: ScriptedLLM, people: dict) -> None:  # noqa: F811
    """A pending run nobody executes (its web process stopped before the thread took it) is not lost."""
    from datetime import timedelta

    from django.utils import timezone

    from core.jobs import stale_runs_sweep
    from generation.documents import SpecText
    from generation.pipeline import generation_run_create

    run = generation_run_create(
        topic=TOPIC,
        spec=SpecText("wiring-guide", 1, "# Guide\n"),
        user=User.objects.get(username="alice"),
        collection_ids=None,
    )
    GenerationRun.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now() - timedelta(hours=1))
    ready.reply = lambda messages: REPLY
    actions = stale_runs_sweep(stale_after=timedelta(minutes=5))
    assert [(a.run_id, a.action) for a in actions] == [(run.pk, "requeued")]
    assert GenerationRun.objects.get(pk=run.pk).status == "succeeded"  # re-run in the sweeping process
