"""The audit chain: every query-log row and finished run hashed onto the one before; tampering by raw SQL is
named at the first row it touched, by ``chain_verify``, ``foundry audit verify`` and the query-log page."""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Callable
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection, connections
from django.db.models import ProtectedError
from django.db.migrations.executor import MigrationExecutor

from generation.audit_chain import FIELDS, GENESIS, QUERIES, RUNS, audit_verify, chain_verify, digest, text_sha256
from generation.documents import SpecText
from generation.models import AuditChainHead, GenerationRun, QueryLog
from generation.pipeline import generation_run_create, generation_run_fail
from tests.conftest import login, record_query

pytestmark = pytest.mark.django_db

SPEC = SpecText("guide", 1, "# Guide\n\nWrite a guide.")


@pytest.fixture
def logged(make_user: Callable[..., Any]) -> list[QueryLog]:
    asker = make_user("asker")
    return [
        record_query(
            asker,
            question=f"question {n}?",
            answer=f"answer {n} [S1]",
            citations=[{"id": "S1", "chunk_id": 10 + n, "text_sha256": text_sha256(f"passage {n}")}],
        )
        for n in range(1, 5)
    ]


def sql(statement: str, params: list[Any] | None = None) -> None:
    with connection.cursor() as cur:
        cur.execute(statement, params or [])


def verify_cli() -> tuple[int, str]:
    out = io.StringIO()
    try:
        call_command("foundry", "audit", "verify", stdout=out)
    except SystemExit as exc:
        return int(exc.code or 0), out.getvalue()
    return 0, out.getvalue()


def test_rows_are_chained_in_order_and_verify(logged: list[QueryLog]) -> None:
    assert [r.chain_seq for r in logged] == [1, 2, 3, 4]
    report = chain_verify(QUERIES)
    assert report.ok and report.rows == 4
    head = AuditChainHead.objects.get(chain=QUERIES)
    assert (head.seq, head.hash) == (4, QueryLog.objects.get(pk=logged[-1].pk).chain_hash)
    code, out = verify_cli()
    assert code == 0 and "query log: 4 rows, the chain verifies" in out and head.hash in out


def test_a_changed_answer_is_named_at_its_row(logged: list[QueryLog]) -> None:
    sql("UPDATE retrieval_querylog SET answer = %s WHERE id = %s", ["a better answer", logged[1].pk])
    report = chain_verify(QUERIES)
    assert [(b.problem, b.row_id) for b in report.breaks] == [("changed", logged[1].pk)]
    code, out = verify_cli()
    assert code == 1 and f"query log: BROKEN, first at row {logged[1].pk} (place 2)" in out


@pytest.mark.parametrize("column", ["citations", "user_id", "question"])
def test_a_changed_citation_asker_or_question_is_named(logged: list[QueryLog], column: str) -> None:
    value = {
        "citations": json.dumps([{"id": "S1", "chunk_id": 12, "text_sha256": text_sha256("another passage")}]),
        "user_id": None,
        "question": "another question?",
    }[column]
    sql(f"UPDATE retrieval_querylog SET {column} = %s WHERE id = %s", [value, logged[1].pk])
    assert chain_verify(QUERIES).first.row_id == logged[1].pk  # type: ignore[union-attr]


def test_a_removed_row_is_named_by_the_row_after_it(logged: list[QueryLog]) -> None:
    sql("DELETE FROM retrieval_querylog WHERE id = %s", [logged[1].pk])
    first = chain_verify(QUERIES).first
    assert first is not None and (first.problem, first.row_id, first.seq) == ("removed", logged[2].pk, 3)
    assert "place 2 of the chain is missing" in first.detail
    code, out = verify_cli()
    assert code == 1 and f"row {logged[2].pk} (place 3)" in out


def test_rows_cut_off_the_end_are_found_by_the_head(logged: list[QueryLog]) -> None:
    sql("DELETE FROM retrieval_querylog WHERE id IN (%s, %s)", [logged[2].pk, logged[3].pk])
    first = chain_verify(QUERIES).first
    assert first is not None and (first.problem, first.row_id, first.seq) == ("removed", None, 3)


def test_a_row_inserted_around_the_chain_is_named(logged: list[QueryLog]) -> None:
    columns = ", ".join(
        f.column for f in QueryLog._meta.concrete_fields if f.attname not in ("id", "run_id", "chain_seq", "chain_hash")
    )
    sql(
        f"INSERT INTO retrieval_querylog (run_id, {columns}) SELECT 'forged', {columns} "
        "FROM retrieval_querylog WHERE id = %s",
        [logged[0].pk],
    )
    forged = QueryLog.objects.get(run_id="forged").pk
    assert [(b.problem, b.row_id) for b in chain_verify(QUERIES).breaks] == [("unchained", forged)]


def _swap_places(a: int, b: int) -> None:
    seq = dict(QueryLog.objects.filter(pk__in=[a, b]).values_list("pk", "chain_seq"))
    sql("UPDATE retrieval_querylog SET chain_seq = 1000 WHERE id = %s", [a])
    sql("UPDATE retrieval_querylog SET chain_seq = %s WHERE id = %s", [seq[a], b])
    sql("UPDATE retrieval_querylog SET chain_seq = %s WHERE id = %s", [seq[b], a])


def _rehash_all() -> None:
    """What a forger who knows the algorithm does after moving rows: hash every link again, and the head."""
    previous = GENESIS
    for row in QueryLog.objects.order_by("chain_seq").values(*FIELDS[QUERIES]):
        previous = digest(previous, row)
        sql("UPDATE retrieval_querylog SET chain_hash = %s WHERE id = %s", [previous, row["id"]])
    sql("UPDATE generation_auditchainhead SET hash = %s WHERE chain = %s", [previous, QUERIES])


def test_rows_moved_in_the_chain_are_named(logged: list[QueryLog]) -> None:
    second, third = logged[1].pk, logged[2].pk
    _swap_places(second, third)
    assert list(QueryLog.objects.order_by("chain_seq").values_list("pk", flat=True)) == [
        logged[0].pk, third, second, logged[3].pk
    ]  # fmt: skip
    first = chain_verify(QUERIES).first
    assert first is not None and (first.problem, first.row_id) == ("changed", third)
    # Hashed again, the moved rows verify, but the chain now lists a row after a newer one.
    _rehash_all()
    first = chain_verify(QUERIES).first
    assert first is not None and (first.problem, first.row_id) == ("out_of_order", second)
    assert f"row {second} is chained after row {third}" in first.detail


def test_a_finished_run_is_chained_and_an_open_one_waits(make_user: Callable[..., Any]) -> None:
    user = make_user("writer")
    done = generation_run_create(topic="sensor wiring", spec=SPEC, output_path="/tmp/never.md", user=user)
    waiting = generation_run_create(topic="sensor wiring again", spec=SPEC, output_path="/tmp/never2.md")
    assert generation_run_fail(run_id=done.pk, error={"type": "Test", "message": "stopped", "transient": False})
    assert not generation_run_fail(run_id=done.pk, error={"type": "Test", "message": "again", "transient": False})
    runs = dict(GenerationRun.objects.values_list("pk", "chain_seq"))
    assert runs == {done.pk: 1, waiting.pk: None}
    assert chain_verify(RUNS).ok
    sql("UPDATE generation_generationrun SET topic = 'other' WHERE id = %s", [done.pk])
    assert [(b.problem, b.row_id) for b in chain_verify(RUNS).breaks] == [("changed", done.pk)]
    sql("UPDATE generation_generationrun SET status = 'failed', finished_at = created_at WHERE id = %s", [waiting.pk])
    assert ("unchained", waiting.pk) in [(b.problem, b.row_id) for b in chain_verify(RUNS).breaks]


def test_an_asker_named_by_the_chain_cannot_be_deleted(logged: list[QueryLog]) -> None:
    asker = logged[0].user
    assert asker is not None
    with pytest.raises(ProtectedError):
        asker.delete()


def test_the_query_log_page_shows_whether_the_chain_verifies(
    make_user: Callable[..., Any], logged: list[QueryLog]
) -> None:
    client = login(logged[0].user)
    page = client.get("/query-log/").content.decode()
    assert 'data-chain="verified"' in page and "4 rows, each hashed onto the one before" in page
    sql("UPDATE retrieval_querylog SET answer = 'rewritten' WHERE id = %s", [logged[2].pk])
    page = client.get("/query-log/").content.decode()
    assert 'data-chain="broken"' in page and f"First at row {logged[2].pk}: it was changed after it was" in page


@pytest.mark.django_db(transaction=True)
def test_concurrent_writers_make_one_unbroken_chain(make_user: Callable[..., Any]) -> None:
    asker = make_user("busy")
    errors: list[BaseException] = []

    def write(worker: int) -> None:
        try:
            for n in range(8):
                record_query(asker, question=f"worker {worker} question {n}?")
        except BaseException as exc:  # reported by the assert below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=write, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    report = chain_verify(QUERIES)
    assert report.ok and report.rows == 32 and report.head_seq == 32


@pytest.mark.django_db(transaction=True)
def test_the_migration_chains_the_rows_already_logged_oldest_first() -> None:
    before = [("generation", "0007_query_log")]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    try:
        old = executor.loader.project_state(before).apps
        OldLog, OldRun = old.get_model("generation", "QueryLog"), old.get_model("generation", "GenerationRun")
        for n in range(3):
            OldLog.objects.create(run_id=f"old-{n}", question=f"old {n}?", mode="hybrid", answer="a")
        for status in ("succeeded", "running"):
            OldRun.objects.create(topic=status, spec_name="s", spec_version=1, spec_body="", status=status)
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
    assert list(QueryLog.objects.order_by("pk").values_list("run_id", "chain_seq")) == [
        ("old-0", 1),
        ("old-1", 2),
        ("old-2", 3),
    ]
    assert dict(GenerationRun.objects.values_list("topic", "chain_seq")) == {"succeeded": 1, "running": None}
    assert all(report.ok for report in audit_verify())
    record_query(None, question="new?")
    assert chain_verify(QUERIES).ok and chain_verify(QUERIES).rows == 4
