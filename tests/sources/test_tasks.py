"""Tasks without a database: the compute side must never open the SQLite file."""

from __future__ import annotations

import json
from pathlib import Path

from sources.services import prepare
from sources.tasks import prepare_source


def test_prepare_source_never_touches_the_database(tmp_path: Path) -> None:
    """No django_db mark: pytest-django's blocker makes any query here raise."""
    (tmp_path / "a.md").write_text("# A\n\nThe valve opens at 2 bar.\n")
    payload = prepare_source.apply(args=(str(tmp_path), "a.md")).get()
    assert payload["status"] == "prepared" and payload["dim"] == 384
    assert json.loads(json.dumps(payload)) == payload
    prepared = prepare.payload_decode(payload)
    assert len(prepared.vectors) == len(prepared.drafts) == 1
    assert abs(sum(v * v for v in prepared.vectors[0]) - 1.0) < 1e-4


def test_prepare_source_reports_bad_file_without_database(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text("{broken")
    payload = prepare_source.apply(args=(str(tmp_path), "bad.json")).get()
    assert payload["status"] == "failed" and "invalid JSON" in payload["reason"] and payload["sha256"]
    missing = prepare_source.apply(args=(str(tmp_path), "gone.txt")).get()
    assert missing["status"] == "failed" and "file vanished during ingest" in missing["reason"]


def test_failure_errback_goes_to_the_db_queue() -> None:
    """Celery runs an errback inline (in the failing compute worker) when its signature takes
    more than the task id; ours must be sent as a message, to the worker next to the database."""
    from foundry_site.celery import app
    from sources.tasks import ingest_file_failed

    assert not app.backend._errback_arity_greater(ingest_file_failed.s(1, "a.md"), 1)
    assert app.amqp.router.route({}, ingest_file_failed.name)["queue"].name == "db"
