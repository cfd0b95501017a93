"""The query-log browser, its CSV export and the dashboard: visibility, filters, escaping."""

from __future__ import annotations

import csv
import io
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from django.utils import timezone

from generation.models import QueryFeedback, QueryLog
from generation.querylog.selectors import dashboard_stats, percentile, visible_queries
from tests.conftest import World
from tests.conftest import login, record_query as record

pytestmark = pytest.mark.django_db

XSS_IMG = "<img src=x onerror=alert(1)>"
XSS_SCRIPT = "<script>alert(1)</script>"


@pytest.fixture
def rows(world: World) -> dict[str, QueryLog]:
    alice, bob = world.users["alice"], world.users["bob"]
    alpha, beta = world.collections["alpha"].pk, world.collections["beta"].pk
    handbook = world.collections["handbook"].pk
    made = {
        "alice_power": record(
            alice,
            question="What is the alpha power?",
            answer="Alpha power is 24 V. [S1]",
            collection_ids=[alpha, handbook],
            coverage=1.0,
            timings={"total": 200.0},
        ),
        "alice_none": record(
            alice,
            question="Who won in 1954?",
            answer_class="no_evidence",
            refusal="gate",
            answer="No supporting documentation found in indexed sources.",
            collection_ids=[alpha, handbook],
            timings={"total": 50.0},
            created_at=timezone.now() - timedelta(days=3),
        ),
        "bob_launch": record(
            bob,
            question="When is the beta launch?",
            answer="In May. [S1]",
            collection_ids=[beta, handbook],
            coverage=0.5,
            timings={"total": 900.0},
        ),
    }
    QueryFeedback.objects.create(query=made["alice_power"], user=alice, verdict="incorrect", note="old")
    QueryFeedback.objects.create(query=made["alice_power"], user=alice, verdict="correct", note="newest wins")
    return made


def auditor(user: Any) -> Any:
    """``user`` with the audit permission that shows every user's query-log rows."""
    user.user_permissions.add(Permission.objects.get(codename="view_querylog"))
    return user


def listed(client: Client, query: str = "") -> list[str]:
    page = client.get(f"/query-log/?{query}")
    assert page.status_code == 200
    return [q.question for q in page.context["page"].object_list]


def test_users_see_only_their_own_rows_auditors_see_all(world: World, rows: dict) -> None:
    assert listed(login(world.users["alice"])) == ["What is the alpha power?", "Who won in 1954?"]
    assert listed(login(world.users["bob"])) == ["When is the beta launch?"]
    bob_row = rows["bob_launch"].pk
    assert login(world.users["alice"]).get(f"/query-log/{bob_row}/").status_code == 404
    # Staff status alone (carol: staff, a reader of alpha only) shows no one else's rows.
    carol = world.users["carol"]
    record(carol, question="What does carol ask?")
    staff = login(carol)
    assert listed(staff) == ["What does carol ask?"] and listed(staff, "user=bob") == ["What does carol ask?"]
    assert "every user" not in staff.get("/query-log/").content.decode()
    for url in (f"/query-log/{bob_row}/", f"/ask/{bob_row}/"):
        assert staff.get(url).status_code == 404, url
    assert staff.post(f"/query-log/{bob_row}/feedback", {"verdict": "correct"}).status_code == 404
    csv_rows = list(
        csv.DictReader(io.StringIO(b"".join(staff.get("/query-log/export.csv").streaming_content).decode()))
    )
    assert [r["question"] for r in csv_rows] == ["What does carol ask?"]
    assert staff.get("/dashboard/").context["stats"].total == 1
    # The audit permission shows every row, staff or not; a superuser holds it.
    for viewer in (auditor(carol), auditor(world.users["alice"]), world.users["root"]):
        assert len(listed(login(viewer))) == 4
        assert login(viewer).get(f"/query-log/{bob_row}/").status_code == 200
    assert "every user" in login(carol).get("/query-log/").content.decode()


def test_filters(world: World, rows: dict) -> None:
    staff = login(auditor(world.users["carol"]))
    assert listed(staff, "user=bob") == ["When is the beta launch?"]
    assert listed(staff, "answer_class=no_evidence") == ["Who won in 1954?"]
    assert listed(staff, "feedback=correct") == ["What is the alpha power?"]
    page = staff.get("/query-log/?feedback=correct").content.decode()
    assert '<span class="badge correct">Correct</span>' in page and '<option value="none">No feedback</option>' in page
    assert listed(staff, "feedback=incorrect") == []  # the newest verdict counts
    assert sorted(listed(staff, "feedback=none")) == ["When is the beta launch?", "Who won in 1954?"]
    assert listed(staff, "q=may") == ["When is the beta launch?"]  # answer text
    assert listed(staff, "q=ALPHA+power") == ["What is the alpha power?"]
    assert listed(staff, f"collection={world.collections['beta'].pk}") == ["When is the beta launch?"]
    assert len(listed(staff, f"collection={world.collections['handbook'].pk}")) == 3
    today = timezone.localdate()
    assert "Who won in 1954?" not in listed(staff, f"date_from={today.isoformat()}")
    assert listed(staff, f"date_to={(today - timedelta(days=1)).isoformat()}") == ["Who won in 1954?"]
    # A user without the audit permission cannot widen the view with user=…; the field is not even offered.
    alice = login(world.users["alice"])
    assert len(listed(alice, "user=bob")) == 2 and 'name="user"' not in alice.get("/query-log/").content.decode()
    assert listed(alice, f"collection={world.collections['beta'].pk}") == []  # not a choice: named, lists nothing
    # An invalid filter lists nothing, and says which: never every row as if it had not been given.
    page = staff.get("/query-log/?date_from=notadate&answer_class=bogus").content.decode()
    assert "From: Enter a valid date.; Answer: Select a valid choice." in page and 'id="querylog"' not in page
    export = staff.get("/query-log/export.csv?date_from=notadate")
    assert export.status_code == 400 and export.content.decode() == "No export: From: Enter a valid date.\n"


def test_pagination_keeps_filters(world: World) -> None:
    alice = world.users["alice"]
    for n in range(55):
        record(alice, question=f"question {n}", answer_class="low_confidence")
    client = login(alice)
    first = client.get("/query-log/?answer_class=low_confidence")
    assert first.context["page"].paginator.count == 55 and len(first.context["page"].object_list) == 50
    assert "answer_class=low_confidence&amp;page=2" in first.content.decode()
    second = client.get("/query-log/?answer_class=low_confidence&page=2")
    assert len(second.context["page"].object_list) == 5


def test_detail_shows_the_full_record(world: World) -> None:
    chunk = world.chunks["alpha"][0]
    beta_chunk = world.chunks["beta"][0]
    row = record(
        world.users["alice"],
        channels={"dense": [[chunk.pk, 0.81], [beta_chunk.pk, 0.2]], "bm25": [[chunk.pk, 3.5]]},
        gate={
            "passed": True,
            "max_score": 0.81,
            "passing": 1,
            "min_score": 0.2,
            "min_chunks": 1,
            "reason": "1 chunk above 0.20",
        },
        timings={"embed": 12.0, "search": 3.0, "generate": 800.0, "total": 1200.0},
        model="scripted/generator",
        prompt_tokens=321,
        completion_tokens=45,
        cost=0.0012,
        llm_calls=1,
        collection_ids=[world.collections["alpha"].pk],
    )
    QueryFeedback.objects.create(query=row, user=world.users["alice"], verdict="correct", note="good")
    page = login(world.users["alice"]).get(f"/query-log/{row.pk}/").content.decode()
    for text in (
        "dense",
        "bm25",
        "0.8100",
        "1 chunk above 0.20",
        "generate 800 ms",
        "total 1.2 s",
        "scripted/generator",
        "321 prompt + 45 completion",
        "0.001200",
        "good",
        "alpha",
    ):
        assert text in page, text
    assert f"/sources/{chunk.source_id}/?chunk={chunk.pk}#chunk-{chunk.pk}" in page
    # The beta chunk id is shown, but alice gets no link into a source she cannot read.
    assert f"?chunk={beta_chunk.pk}" not in page and f">{beta_chunk.pk}<" in page
    assert "Asked as" not in page  # asked standalone: no follow-up message


def test_detail_shows_a_follow_up_as_typed_beside_the_question_answered(world: World) -> None:
    row = record(world.users["alice"], question="And E04? (error code)", message="And E04?")
    page = login(world.users["alice"]).get(f"/query-log/{row.pk}/").content.decode()
    assert "Asked as" in page and "And E04?</pre>" in page and "And E04? (error code)</pre>" in page


def test_a_reader_refusal_keeps_its_scores_in_the_query_log(world: World) -> None:
    grounding = {"reader": "extractive", "best": 0.6704, "threshold": 0.8, "quoted": [], "top_units": []}
    row = record(world.users["alice"], answer_class="no_evidence", refusal="reader", grounding=grounding)
    page = login(world.users["alice"]).get(f"/query-log/{row.pk}/").content.decode()
    assert '<dd id="reader-score">best sentence 0.670; the reader quotes from 0.80</dd>' in page


def test_grounding_verdicts_are_shown_to_staff_and_auditors_only(world: World) -> None:
    grounding = {
        "model_output": f"Alpha power is 48 V {XSS_SCRIPT}.",
        "refused": False,
        "invalid_citations": ["S9"],
        "sentences": [{"text": "Alpha power is 48 V.", "cited": ["S1"], "supported_by": "", "support": 0.0}],
    }
    row = record(world.users["alice"], answer_class="no_evidence", refusal="grounding", grounding=grounding)
    staff = login(auditor(world.users["carol"])).get(f"/query-log/{row.pk}/").content.decode()
    assert "Grounding check" in staff and "Alpha power is 48 V." in staff and "withheld" in staff
    assert "S9" in staff and XSS_SCRIPT not in staff and "&lt;script&gt;" in staff
    asker = login(world.users["alice"]).get(f"/query-log/{row.pk}/").content.decode()
    assert "Grounding check" not in asker and "48 V" not in asker
    # Staff see the verdicts on their own rows, as before; an auditor who is not staff sees them too.
    own = record(world.users["carol"], answer_class="no_evidence", refusal="grounding", grounding=grounding)
    carol_staff_only = login(world.users["carol"])
    world.users["carol"].user_permissions.clear()
    assert "Grounding check" in carol_staff_only.get(f"/query-log/{own.pk}/").content.decode()
    assert carol_staff_only.get(f"/query-log/{row.pk}/").status_code == 404
    assert "Grounding check" in login(auditor(world.users["bob"])).get(f"/query-log/{row.pk}/").content.decode()


def test_an_extractive_answer_shows_its_quotes_and_scores_not_an_empty_model_output(world: World) -> None:
    quote = {"label": "S1", "text": "Alpha power is 48 V.", "kind": "sentence", "lines": [3, 3]}
    grounding = {
        "reader": "extractive",
        "best": 0.912,
        "followed": ["S1"],
        "quoted": [{**quote, "score": 0.912, "cosine": 0.61, "lexical": 0.6}],
        "top_units": [],
    }
    row = record(world.users["alice"], grounding=grounding)
    staff = login(auditor(world.users["carol"])).get(f"/query-log/{row.pk}/").content.decode()
    assert "Extractive reading" in staff and "Model output" not in staff and "Grounding check" not in staff
    assert "Staff-only audit" not in staff  # the template's comment stays a comment
    assert "Best unit score 0.912" in staff and "earlier turn was answered: S1" in staff
    assert "<td>Alpha power is 48 V.</td><td>S1</td><td>3</td>" in staff
    assert "Extractive reading" not in login(world.users["alice"]).get(f"/query-log/{row.pk}/").content.decode()


def test_csv_export_has_the_filtered_rows(world: World, rows: dict) -> None:
    record(world.users["alice"], question='=HYPERLINK("http://x")', answer="ok")
    response = login(world.users["alice"]).get("/query-log/export.csv?answer_class=normal")
    assert response["Content-Type"].startswith("text/csv")
    assert response["Content-Disposition"].startswith('attachment; filename="query-log-')
    table = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert [r["question"] for r in table] == ['\'=HYPERLINK("http://x")', "What is the alpha power?"]
    power = table[1]
    assert power["user"] == "alice" and power["feedback"] == "correct" and power["total_ms"] == "200.0"
    assert power["answer_class"] == "normal" and power["answer"] == "Alpha power is 24 V. [S1]"
    everyone = login(auditor(world.users["carol"])).get("/query-log/export.csv")
    assert len(list(csv.DictReader(io.StringIO(b"".join(everyone.streaming_content).decode())))) == 4


def test_csv_export_writes_each_citation_where_pages_cite_it(world: World) -> None:
    """The sources column names a citation's place as every page does ("line 155", not "lines 155-155"); a
    citation recorded before citations kept their location is written from its page and lines."""
    now = {"id": "S1", "source": "manual.md", "lines": [155, 155], "location": "§ LEDs, line 155"}
    old = {"id": "S2", "source": "sheet.pdf", "page": 2, "lines": [4, 9]}
    record(world.users["alice"], question="Where?", citations=[now, old])
    response = login(world.users["alice"]).get("/query-log/export.csv")
    (row,) = csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode()))
    assert row["sources"] == "[S1] manual.md, § LEDs, line 155; [S2] sheet.pdf, p. 2, lines 4-9"


def test_audit_pages_escape_stored_text(world: World) -> None:
    alice = world.users["alice"]
    row = record(
        alice,
        question=XSS_IMG,
        answer=XSS_SCRIPT,
        error=XSS_IMG,
        citations=[
            {
                "id": "S1",
                "chunk_id": 1,
                "source": XSS_SCRIPT,
                "title": XSS_SCRIPT,
                "heading": XSS_IMG,
                "page": None,
                "lines": [1, 2],
                "score": 0.5,
            }
        ],
    )
    QueryFeedback.objects.create(query=row, user=alice, verdict="incorrect", note=XSS_IMG)
    client = login(alice)
    for url in ("/query-log/", f"/query-log/{row.pk}/", "/dashboard/"):
        page = client.get(url).content.decode()
        assert XSS_IMG not in page and XSS_SCRIPT not in page, url
    detail = client.get(f"/query-log/{row.pk}/").content.decode()
    assert "&lt;img src=x onerror=alert(1)&gt;" in detail and "&lt;script&gt;" in detail


def test_dashboard_numbers_and_chart(world: World, rows: dict) -> None:
    page = login(auditor(world.users["carol"])).get("/dashboard/")
    stats = page.context["stats"]
    assert stats.total == 3 and stats.refusal_share == pytest.approx(1 / 3)
    assert stats.mean_coverage == pytest.approx(0.75) and stats.p50_ms == 200.0 and stats.p95_ms == 900.0
    html = page.content.decode()
    assert "<svg" in html and html.count('class="total"') == 30 and "33%" in html
    assert sum(d.total for d in login(world.users["bob"]).get("/dashboard/?days=7").context["stats"].days) == 1


def test_dashboard_stats_and_percentile_units(world: World, rows: dict) -> None:
    stats = dashboard_stats(visible_queries(world.users["alice"]), days=7)
    assert stats.total == 2 and [d.total for d in stats.days if d.total] == [1, 1]
    assert stats.days[-1].day == timezone.localdate() and stats.refusal_share == 0.5
    assert percentile([], 50) is None and percentile([5.0], 95) == 5.0
    assert percentile([float(n) for n in range(1, 101)], 95) == 95.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.0


def test_a_withheld_answer_is_labelled_as_the_ask_page_labels_it(world: World, rows: dict) -> None:
    alice = world.users["alice"]
    read = record(alice, question="What is the price?", answer_class="no_evidence", refusal="reader", answer="best 0.7")
    client = login(alice)
    listing, detail = client.get("/query-log/").content.decode(), client.get(f"/query-log/{read.pk}/").content.decode()
    for page in (listing, detail):
        assert '<span class="badge unverified" data-answer-class="no_evidence">Found, but no sentence' in page
    assert '<span class="badge none" data-answer-class="no_evidence">No evidence in your sources</span>' in listing
    assert '<span class="badge normal" data-answer-class="normal">Normal answer</span>' in listing
