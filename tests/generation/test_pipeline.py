"""The generation run split in three steps: prepare (db), compute (no database at all), store (db)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.db import OperationalError

from core import jobs
from generation import pipeline
from generation.documents import SpecText
from generation.models import GenerationRun
from generation.pipeline import generation_run_create, generation_run_execute
from generation.tasks import generate_compute
from tests.conftest import ScriptedLLM
from tests.generation.test_documents import doc_reply

pytestmark = pytest.mark.django_db

SPEC = SpecText("wiring-guide", 2, "# Wiring guide spec\n\nWrite a short wiring guide with a Power section.")
TOPIC = "wiring the AX-200 power and sensor bus"


def prepared_run(tmp_path: Path, name: str = "guide.md") -> tuple[GenerationRun, dict[str, Any]]:
    run = generation_run_create(topic=TOPIC, spec=SPEC, output_path=str(tmp_path / name))
    payload = pipeline.generation_run_prepare(run_id=run.pk)
    assert payload is not None
    return GenerationRun.objects.get(pk=run.pk), json.loads(json.dumps(payload))  # as a message carries it


def test_compute_step_never_touches_the_database(
    indexed: Path, tmp_path: Path, scripted_llm: ScriptedLLM, django_db_blocker: Any
) -> None:
    scripted_llm.reply = doc_reply
    run, payload = prepared_run(tmp_path)
    assert run.status == "running" and run.stage == "retrieval" and run.attempts == 1
    assert {p["label"] for p in payload["passages"]} and payload["model"] == "scripted/generator"
    with django_db_blocker.block():
        with pytest.raises(RuntimeError, match="Database access not allowed"):
            GenerationRun.objects.count()  # the blocker is really on
        result = generate_compute.apply(args=(payload,)).get()
    assert json.loads(json.dumps(result)) == result
    assert result["status"] == "generated" and result["usage"]["llm_calls"] == 1
    assert result["sentences_total"] == 4 and result["sentences_kept"] == 2
    assert "[^1]" in result["document"] and "manual.md §Power supply, lines" in result["document"]
    assert not Path(run.output_path).exists()  # the compute step writes no file either
    assert pipeline.generation_run_store(result=result) is True
    run.refresh_from_db()
    # Half the sentences kept is under generation.min_coverage: written, and it needs review.
    assert run.status == "needs_review" and run.stage == "done" and run.llm_calls == 1 and run.coverage == 0.5
    assert Path(run.output_path).read_text() == result["document"]
    assert set(run.timings) >= {"generate", "grounding", "total"}


def test_store_is_idempotent_and_drops_late_results(
    indexed: Path, tmp_path: Path, scripted_llm: ScriptedLLM, django_db_blocker: Any
) -> None:
    scripted_llm.reply = doc_reply
    run, payload = prepared_run(tmp_path)
    result = pipeline.generation_run_compute(payload=payload)
    assert pipeline.generation_run_store(result=result) is True
    out = Path(run.output_path)
    first = out.stat().st_mtime_ns
    assert pipeline.generation_run_store(result=result) is False  # a re-delivered store message
    assert pipeline.generation_run_store(result={**result, "document": "# other\n"}) is False
    assert out.stat().st_mtime_ns == first and out.read_text() == result["document"]
    assert GenerationRun.objects.get(pk=run.pk).llm_calls == 1  # usage counted once
    assert not pipeline.generation_run_fail(run_id=run.pk, error={"type": "X", "message": "late", "transient": False})
    assert GenerationRun.objects.get(pk=run.pk).status == "needs_review"  # coverage 0.5, as stored first
    assert list(out.parent.glob("*.part")) == []


def test_unsupported_text_fails_in_compute_and_is_recorded(
    indexed: Path, tmp_path: Path, scripted_llm: ScriptedLLM, django_db_blocker: Any
) -> None:
    scripted_llm.reply = lambda m: "The moon is made of cheese [S1]."
    run, payload = prepared_run(tmp_path)
    with django_db_blocker.block():
        result = generate_compute.apply(args=(payload,)).get()
    assert result["status"] == "failed" and result["error"]["type"] == "GenerationError"
    assert result["sentences_total"] == 1 and result["sentences_kept"] == 0
    pipeline.generation_run_store(result=result)
    run.refresh_from_db()
    assert run.status == "failed" and "grounding check removed every sentence" in run.error["message"]
    assert run.llm_calls == 1 and run.sentences_total == 1 and not Path(run.output_path).exists()
    assert run.grounding["model_output"] == "The moon is made of cheese [S1]."  # what was left out, for the audit
    assert [(s["text"], s["cited"], s["supported_by"]) for s in run.grounding["sentences"]] == [
        ("The moon is made of cheese.", ["S1"], "")
    ]


def test_permanent_model_error_fails_with_reason(indexed: Path, tmp_path: Path, django_db_blocker: Any) -> None:
    run, payload = prepared_run(tmp_path)
    with django_db_blocker.block():
        result = generate_compute.apply(args=({**payload, "model": "local/no-such-model"},)).get()
    assert result["status"] == "failed" and result["error"]["type"] == "ModelUnavailable"
    assert result["error"]["transient"] is False and "no-such-model" in result["error"]["message"]
    pipeline.generation_run_store(result=result)
    run.refresh_from_db()
    assert run.status == "failed" and "unknown local chat model 'no-such-model'" in run.error["message"]


def test_transient_model_error_is_raised_for_a_retry_with_a_broker(
    indexed: Path, tmp_path: Path, scripted_llm: ScriptedLLM, foundry_config: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    foundry_config(llm={"retries": 0})
    scripted_llm.reply = lambda m: ""  # an empty completion counts as a transient failure
    run, payload = prepared_run(tmp_path)
    monkeypatch.setattr(jobs, "is_eager", lambda: False)
    with pytest.raises(pipeline.llm.LLMError) as caught:
        pipeline.generation_run_compute(payload=payload)
    assert caught.value.transient
    monkeypatch.undo()
    # In-process there is no retry: the failure is recorded at once, as before the split.
    result = pipeline.generation_run_compute(payload=payload)
    assert result["status"] == "failed" and result["error"]["transient"] is True


def test_transient_error_while_preparing_puts_the_run_back(
    indexed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = generation_run_create(topic=TOPIC, spec=SPEC, output_path=str(tmp_path / "a.md"))

    def locked(**kwargs: Any) -> None:
        raise OperationalError("database is locked")

    monkeypatch.setattr(pipeline, "document_prepare", locked)
    monkeypatch.setattr(jobs, "is_eager", lambda: False)
    with pytest.raises(OperationalError):
        pipeline.generation_run_prepare(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == "pending" and run.attempts == 0  # the retried task claims it again


def test_unexpected_error_in_process_fails_the_run_and_is_raised(
    indexed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = generation_run_create(topic=TOPIC, spec=SPEC, output_path=str(tmp_path / "a.md"))

    def broken(**kwargs: Any) -> None:
        raise KeyError("oops")

    monkeypatch.setattr(pipeline, "document_prepare", broken)
    with pytest.raises(KeyError):
        generation_run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == "failed" and run.error["message"] == "KeyError: 'oops'" and run.stage == "done"


def test_progress_is_ignored_for_other_attempts_and_finished_runs(
    indexed: Path, tmp_path: Path, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.reply = doc_reply
    run, payload = prepared_run(tmp_path)
    pipeline.generation_run_progress(run_id=run.pk, attempt=1, stage="generate")
    assert GenerationRun.objects.get(pk=run.pk).stage == "generate"
    pipeline.generation_run_progress(run_id=run.pk, attempt=2, stage="grounding")  # a stale attempt's message
    assert GenerationRun.objects.get(pk=run.pk).stage == "generate"
    pipeline.generation_run_store(result=pipeline.generation_run_compute(payload=payload))
    pipeline.generation_run_progress(run_id=run.pk, attempt=1, stage="grounding")  # arrives after the store
    assert GenerationRun.objects.get(pk=run.pk).stage == "done"


def test_in_process_stages_in_order(
    indexed: Path, tmp_path: Path, scripted_llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[str] = []
    real = pipeline.generation_run_progress

    def spy(**kwargs: Any) -> None:
        real(**kwargs)
        seen.append(GenerationRun.objects.get(pk=kwargs["run_id"]).stage)

    monkeypatch.setattr(pipeline, "generation_run_progress", spy)
    scripted_llm.reply = doc_reply
    run = generation_run_create(topic=TOPIC, spec=SPEC, output_path=str(tmp_path / "a.md"))
    generation_run_execute(run_id=run.pk)
    assert seen == ["generate", "grounding"] and GenerationRun.objects.get(pk=run.pk).stage == "done"


def test_compute_goes_to_compute_and_the_rest_to_db() -> None:
    """Celery runs an errback inline (in the failing compute worker) when its signature takes
    more than the task id; ours must be sent as a message, to the worker next to the database."""
    from foundry_site.celery import app
    from generation import tasks

    route = app.amqp.router.route
    assert route({}, tasks.generate_compute.name)["queue"].name == "compute"
    for task in (tasks.generate_document, tasks.generate_progress, tasks.generate_store, tasks.generate_failed):
        assert route({}, task.name)["queue"].name == "db"
    assert not app.backend._errback_arity_greater(tasks.generate_failed.s(1), 1)
