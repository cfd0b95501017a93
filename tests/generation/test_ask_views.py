"""The ask page: plain form POST, the answer page, scope, rate limit, streamed stages, escaping."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.test import Client

from core.ratelimit import rate_limit_check
from generation.conversations import TITLE_CHARS, conversation_title
from generation.models import Conversation, QueryFeedback, QueryLog
from sources.models import Chunk
from tests.conftest import ScriptedLLM, World, login, record_query as record

pytestmark = pytest.mark.django_db

QUESTION = "How many sensors can be connected to the RS-485 bus?"
XSS_SCRIPT = "<script>alert(1)</script>"
XSS_IMG = "<img src=x onerror=alert(1)>"


def ask(client: Client, question: str = QUESTION) -> Any:
    return client.post("/ask/", {"question": question})


def answer_page(client: Client, question: str = QUESTION) -> tuple[QueryLog, str]:
    response = ask(client, question)
    assert response.status_code == 302, response.content[:500]
    row = QueryLog.objects.get(pk=int(response["Location"].rsplit("#turn-", 1)[1]))
    assert response["Location"] == f"/conversations/{row.conversation_id}/#turn-{row.pk}"
    return row, client.get(response["Location"]).content.decode()


def test_ask_page_has_a_plain_form(client: Client, make_user: Any) -> None:
    client.force_login(make_user("alice"))
    page = client.get("/ask/")
    assert page.status_code == 200 and 'name="question"' in page.content.decode()


def test_answer_cites_only_the_askers_collections(scoped: dict, scripted_llm: ScriptedLLM) -> None:
    row, page = answer_page(login(scoped["alice"]))
    assert row.user == scoped["alice"] and row.answer_class in ("normal", "low_confidence")
    assert row.citations and {c["source"] for c in row.citations} == {"alpha-notes.md"}
    assert all("32 sensors" not in m["content"] for call in scripted_llm.calls for m in call)
    chunk = Chunk.objects.get(pk=row.citations[0]["chunk_id"])
    first, last = row.citations[0]["lines"]  # the viewer highlights the cited lines
    link = f"/sources/{chunk.source_id}/?chunk={chunk.pk}&amp;lines={first}-{last}#chunk-{chunk.pk}"
    assert link in page and 'href="#source-S1"' in page and 'id="source-S1"' in page
    assert "32 sensors" not in page and "alpha-notes.md" in page
    assert 'data-answer-class="' + row.answer_class in page

    bob_row, bob_page = answer_page(login(scoped["bob"]))
    assert {c["source"] for c in bob_row.citations} == {"beta-notes.md"} and "32 sensors" in bob_page


def test_superuser_searches_every_collection(scoped: dict) -> None:
    row, _ = answer_page(login(scoped["root"]))
    assert {c["source"] for c in row.citations} == {"alpha-notes.md", "beta-notes.md"}
    assert row.collection_ids is None


def test_no_evidence_shows_badge_and_hint(scoped: dict, scripted_llm: ScriptedLLM) -> None:
    row, page = answer_page(login(scoped["alice"]), "Who won the football world cup in 1954?")
    assert row.answer_class == "no_evidence" and scripted_llm.calls == []
    assert "No evidence in your sources" in page and "matched the question closely enough" in page


@pytest.mark.parametrize("question", ["", "   ", "x" * 4001])
def test_bad_question_is_400(world: World, question: str) -> None:
    response = ask(login(world.users["alice"]), question)
    assert response.status_code == 400 and QueryLog.objects.count() == 0
    assert 'class="errorlist"' in response.content.decode()


def test_rate_limit_shows_the_wait(world: World, settings: Any) -> None:
    settings.FOUNDRY_QUERY_RATE = 1
    alice = world.users["alice"]
    assert rate_limit_check(alice.pk) is None
    response = ask(login(alice))
    assert response.status_code == 429 and int(response["Retry-After"]) >= 1
    assert "Too many queries: at most 1 a minute. Try again in" in response.content.decode()
    assert QueryLog.objects.count() == 0


def test_user_without_collections_is_told(make_user: Any) -> None:
    response = ask(login(make_user("dave")))
    assert response.status_code == 400 and "cannot read any collection" in response.content.decode()


def test_missing_embeddings_is_503_with_the_fix(world: World) -> None:
    response = ask(login(world.users["alice"]))
    assert response.status_code == 503 and "No embeddings found for model" in response.content.decode()


def auditor(user: Any) -> Any:
    """``user`` with the audit permission that shows every user's query-log rows."""
    user.user_permissions.add(Permission.objects.get(codename="view_querylog"))
    return user


def test_answer_page_is_the_askers_or_an_auditors(world: World) -> None:
    beta = world.chunks["beta"][0]
    row = record(
        world.users["bob"],
        citations=[
            {"id": "S1", "chunk_id": beta.pk, "source": "beta.txt", "title": "beta.txt", "lines": [1, 1], "score": 0.8}
        ],
    )
    assert "(no longer readable)" not in login(world.users["bob"]).get(f"/ask/{row.pk}/").content.decode()
    assert login(world.users["alice"]).get(f"/ask/{row.pk}/").status_code == 404
    assert login(world.users["carol"]).get(f"/ask/{row.pk}/").status_code == 404  # staff alone is not enough
    page = login(auditor(world.users["carol"])).get(f"/ask/{row.pk}/").content.decode()
    # Carol never could read beta: the source is not "no longer" readable to her, and is not linked.
    assert 'beta.txt <span class="muted small">(not readable by you)</span>' in page
    assert "(no longer readable)" not in page and f"/sources/{beta.source_id}/" not in page
    world.collections["beta"].readers.remove(world.users["bob"])
    assert "(no longer readable)" in login(world.users["bob"]).get(f"/ask/{row.pk}/").content.decode()


def test_feedback_only_by_asker_or_staff_auditor(world: World) -> None:
    row = record(world.users["alice"])
    url = f"/query-log/{row.pk}/feedback"
    assert login(world.users["bob"]).post(url, {"verdict": "correct"}).status_code == 404
    assert login(world.users["carol"]).post(url, {"verdict": "correct"}).status_code == 404  # staff alone
    auditor(world.users["carol"])
    done = login(world.users["alice"]).post(
        url, {"verdict": "incorrect", "note": "wrong bus", "next": f"/ask/{row.pk}/"}
    )
    assert done.status_code == 302 and done["Location"] == f"/ask/{row.pk}/"
    assert login(world.users["carol"]).post(url, {"verdict": "correct"}).status_code == 302
    assert list(QueryFeedback.objects.order_by("pk").values_list("user__username", "verdict", "note")) == [
        ("alice", "incorrect", "wrong bus"),
        ("carol", "correct", ""),
    ]
    off_site = login(world.users["alice"]).post(url, {"verdict": "correct", "next": "https://evil.example/"})
    assert off_site["Location"] == f"/query-log/{row.pk}/"
    bad = login(world.users["alice"]).post(url, {"verdict": "maybe"})
    assert bad.status_code == 302 and QueryFeedback.objects.count() == 3


def test_page_content_is_escaped(world: World) -> None:
    alice = world.users["alice"]
    chunk = world.chunks["alpha"][0]
    row = record(
        alice,
        question=XSS_IMG,
        answer=f"{XSS_SCRIPT} Alpha power is 24 V. [S1]",
        citations=[
            {
                "id": "S1",
                "chunk_id": chunk.pk,
                "source": XSS_SCRIPT,
                "title": XSS_SCRIPT,
                "heading": XSS_IMG,
                "page": None,
                "lines": [1, 1],
                "score": 0.8,
            }
        ],
        conflicts=[
            {
                "quantity": "VCC",
                "detector": "rule",
                "a": {"label": "S1", "source": XSS_SCRIPT, "where": "", "quote": XSS_IMG},
                "b": {"label": "S2", "source": "b.md", "where": "", "quote": "VCC = 5 V"},
            }
        ],
    )
    QueryFeedback.objects.create(query=row, user=alice, verdict="incorrect", note=XSS_IMG)
    page = login(alice).get(f"/ask/{row.pk}/").content.decode()
    assert XSS_SCRIPT not in page and XSS_IMG not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    assert page.index("Conflict between sources") < page.index('class="answer-text"')
    assert "Check which source applies to your device" in page and "feature spec" not in page  # an asker has none


def sse_events(response: Any) -> list[tuple[str, dict]]:
    text = b"".join(response.streaming_content).decode()
    events = []
    for block in text.split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines() if not line.startswith(":"))
        if "event" in lines:
            events.append((lines["event"], json.loads(lines["data"])))
    return events


@pytest.mark.django_db(transaction=True)
def test_stream_sends_stages_then_the_checked_answer(scoped: dict, scripted_llm: ScriptedLLM) -> None:
    client = login(scoped["alice"])
    response = client.post("/ask/stream", {"question": QUESTION})
    assert response.status_code == 200 and response["Content-Type"] == "text/event-stream"
    events = sse_events(response)
    kinds = [e for e, _ in events]
    # The one-sentence reply is finished only when the model stops, so it is checked and sent after "checking".
    assert kinds[:2] == ["stage", "stage"] and kinds[-2:] == ["sentence", "answer"]
    assert [d["stage"] for e, d in events if e == "stage"] == ["retrieving", "generating", "checking"]
    answer = events[-1][1]
    row = QueryLog.objects.get(user=scoped["alice"])
    assert answer["url"] == f"/conversations/{row.conversation_id}/#turn-{row.pk}"
    assert "alpha-notes.md" in answer["html"]
    assert answer["title"] == row.conversation.title == QUESTION
    # Only checked sentences are sent, and together they are the logged answer, markers and all.
    assert "".join(d["text"] for e, d in events if e == "sentence") == row.answer
    assert all(e != "sentence" or "[S" in d["text"] for e, d in events)  # each with its source


@pytest.mark.django_db(transaction=True)
def test_the_stream_titles_a_conversation_as_its_page_does(scoped: dict) -> None:
    long = QUESTION[:-1] + ", " + "and with every cable length and every baud rate there is " * 40 + "?"
    answer = sse_events(login(scoped["alice"]).post("/ask/stream", {"question": long}))[-1][1]
    assert answer["title"].endswith("…") and len(answer["title"]) <= TITLE_CHARS
    assert answer["title"] == conversation_title(long) == Conversation.objects.get().title


def test_stream_rejects_bad_input_and_rate_limit(world: World, settings: Any) -> None:
    client = login(world.users["alice"])
    bad = client.post("/ask/stream", {"question": "  "})
    assert bad.status_code == 400 and bad.json()["detail"] == "the question is empty"
    settings.FOUNDRY_QUERY_RATE = 1
    rate_limit_check(world.users["alice"].pk)
    limited = client.post("/ask/stream", {"question": QUESTION})
    assert limited.status_code == 429 and "Retry-After" in limited and "Try again in" in limited.json()["detail"]


def test_stream_needs_login_and_csrf(world: World) -> None:
    assert Client().post("/ask/stream", {"question": QUESTION}).status_code == 302
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(world.users["alice"])
    assert strict.post("/ask/stream", {"question": QUESTION}).status_code == 403


def test_recent_questions_list_the_askers_own_newest_first(world: World) -> None:
    alice, bob = world.users["alice"], world.users["bob"]
    for n in range(8):
        record(alice, question=f"Alice question {n}?")
    record(bob, question="Bob's question?")
    page = login(alice).get("/ask/").content.decode()
    assert "Your recent questions" in page
    shown = [f"Alice question {n}?" for n in range(8) if f"Alice question {n}?" in page]
    assert shown == [f"Alice question {n}?" for n in range(2, 8)]  # the six newest
    assert page.index("Alice question 7?") < page.index("Alice question 2?")
    assert "Bob&#x27;s question?" not in page and "Bob's question?" not in page


def test_no_recent_questions_box_before_the_first_question(world: World) -> None:
    assert "Your recent questions" not in login(world.users["alice"]).get("/ask/").content.decode()


def test_ask_page_names_the_readable_collections_and_whom_to_ask(world: World, make_user: Any) -> None:
    page = login(world.users["alice"]).get("/ask/").content.decode()
    assert "You can read: alpha, handbook." in page and "For access to more, ask root." in page
    assert "beta" not in page
    assert "You can read every collection." in login(world.users["root"]).get("/ask/").content.decode()
    from sources.models import Collection

    Collection.objects.filter(public=True).update(public=False)
    newcomer = login(make_user("dora")).get("/ask/").content.decode()
    assert "You cannot read any collection yet" in newcomer and "For access to a collection, ask root." in newcomer


def test_a_team_install_lets_every_signed_in_user_read_default(make_user: Any) -> None:
    from foundry_site.services.setup import team_collection_open
    from sources.selectors import readable_collections

    dora = make_user("dora")
    collection, changed = team_collection_open()
    assert changed and collection.public and list(readable_collections(dora)) == [collection]
    assert team_collection_open() == (collection, False)  # idempotent
    assert "You can read: default." in login(dora).get("/ask/").content.decode()


def refusal_page(world: World, refusal: str, answer: str, *, channels: dict | None = None) -> str:
    row = record(
        world.users["alice"], answer_class="no_evidence", refusal=refusal, answer=answer, channels=channels or {}
    )
    return login(world.users["alice"]).get(f"/ask/{row.pk}/").content.decode()


def test_gate_refusal_says_nothing_was_found_and_offers_the_upload(world: World) -> None:
    page = refusal_page(world, "gate", "No supporting documentation found in indexed sources.")
    assert "No evidence in your sources" in page and 'data-refusal="gate"' in page
    assert 'href="/sources/#upload-title"' in page
    assert "foundry ingest" not in page  # CLI text stays on the command line
    assert "before it was shown" not in page
    assert "No supporting documentation found" not in page  # said once, in the page's own words


def test_gate_refusal_tells_a_reader_of_public_collections_only_whom_to_ask(world: World, make_user: Any) -> None:
    dora = make_user("dora")  # reads the public handbook, but only its named readers and staff add to it
    row = record(dora, answer_class="no_evidence", refusal="gate", answer="No supporting documentation found.")
    page = login(dora).get(f"/ask/{row.pk}/").content.decode()
    assert 'href="/sources/#upload-title"' not in page
    assert "To get answers about this, a document that covers it must be added: ask root." in page


def test_grounding_refusal_says_found_but_unverified_and_links_each_passage(world: World) -> None:
    alpha = world.chunks["alpha"]
    answer = (
        "No answer could be verified: the model's sentences were not supported by the passages found, so "
        "they were withheld. Read the passages, or ask again in other words. Passages found: S1 alpha.md, "
        "lines 1-1; S2 alpha.md, lines 3-3; S3 gone.md, lines 5-9."
    )
    page = refusal_page(world, "grounding", answer, channels={"bm25": [[alpha[0].pk, 1.0], [alpha[1].pk, 0.5]]})
    assert "Found, but could not verify" in page and "No evidence in your sources" not in page
    assert "before it was shown" not in page and "nothing was shown" in page
    assert "No answer could be verified" not in page  # said once, in the page's own words
    for chunk in alpha:
        assert f'href="/sources/{chunk.source_id}/?chunk={chunk.pk}#chunk-{chunk.pk}"' in page
    assert "S3 gone.md, lines 5-9 <span" in page  # named, not linked: no such readable chunk


def test_reader_refusal_says_why_once_then_lists_the_passages(world: World) -> None:
    alpha = world.chunks["alpha"]
    answer = (
        "The passages found are about this, but none of their sentences answers the question closely enough to "
        "quote as the answer. Read the passages, or ask again in other words. Passages found: S1 alpha.md, lines 1-1."
    )
    page = refusal_page(world, "reader", answer, channels={"bm25": [[alpha[0].pk, 1.0]]})
    assert page.count("none of their sentences answers") == 1 and "with enough confidence" not in page
    assert '<p class="outcome" data-refusal="reader">The closest passages:</p>' in page
    assert f"chunk={alpha[0].pk}" in page


def test_refusal_links_its_passages_after_their_file_was_named_with_its_folder_and_back(world: World) -> None:
    # A file is named with its folder while another folder of its collection has it: the names the refusal
    # recorded still find their chunks, in either direction.
    alpha = world.chunks["alpha"][0]
    source = alpha.source
    link = f"chunk={alpha.pk}#chunk-{alpha.pk}"
    listed = f"No answer could be verified. Passages found: S1 {source.name}, lines 1-1."
    source.name = f"docs/{source.path}"
    source.save()
    assert link in refusal_page(world, "grounding", listed, channels={"bm25": [[alpha.pk, 1.0]]})
    listed = f"No answer could be verified. Passages found: S1 {source.name}, lines 1-1."
    source.name = source.path
    source.save()
    page = refusal_page(world, "grounding", listed, channels={"bm25": [[alpha.pk, 1.0]]})
    assert link in page and "(no longer readable)" not in page


def test_grounding_refusal_never_links_a_chunk_the_viewer_cannot_read(world: World) -> None:
    beta = world.chunks["beta"][0]
    page = refusal_page(
        world,
        "grounding",
        "No answer could be verified. Passages found: S1 beta.txt, lines 1-1.",
        channels={"bm25": [[beta.pk, 1.0]]},
    )
    assert f"chunk={beta.pk}" not in page


@pytest.mark.parametrize(
    ("refusal", "badge"),
    [
        ("model", "Not in your sources"),
        ("reader", "Found, but no sentence answers it"),
        ("absent", "Not mentioned in your sources"),
        ("relevance", "No evidence in your sources"),
    ],
)
def test_each_refusal_has_its_own_badge(world: World, refusal: str, badge: str) -> None:
    page = refusal_page(world, refusal, "The sources do not contain this.")
    assert badge in page and f'data-refusal="{refusal}"' in page and "before it was shown" not in page


def test_an_answer_that_was_shown_says_it_was_checked(world: World) -> None:
    row = record(world.users["alice"], answer="Alpha power is 24 V. [S1]")
    assert "before it was shown" in login(world.users["alice"]).get(f"/ask/{row.pk}/").content.decode()


def test_a_three_way_conflict_is_one_box_naming_every_side(world: World) -> None:
    alpha = world.chunks["alpha"]
    beta = world.chunks["beta"][0]  # alice cannot read beta: named, not linked

    def side(label: str, chunk: Chunk, quote: str) -> dict:
        return {
            "label": label,
            "source": chunk.source.name,
            "where": "",
            "quote": quote,
            "chunk_id": chunk.pk,
            "lines": [chunk.line_start, chunk.line_start],
        }

    a, b, c = side("S1", alpha[0], "VCC = 3.3 V"), side("S2", alpha[1], "VCC = 5 V"), side("S3", beta, "VCC = 12 V")
    pairs = [{"quantity": "VCC", "detector": "rule", "a": x, "b": y} for x, y in ((a, b), (a, c), (b, c))]
    row = record(world.users["alice"], answer="VCC is 3.3 V. [S1]", conflicts=pairs)
    page = login(world.users["alice"]).get(f"/ask/{row.pk}/").content.decode()
    assert page.count('class="conflict"') == 1 and page.count('class="conflict-side"') == 3
    for letter, quote in (("A", "3.3 V"), ("B", "5 V"), ("C", "12 V")):
        assert f"Source {letter} (" in page and f"VCC = {quote}" in page
    for chunk in alpha[:2]:
        line = chunk.line_start
        assert f'href="/sources/{chunk.source_id}/?chunk={chunk.pk}&amp;lines={line}-{line}#chunk-{chunk.pk}"' in page
    assert f"chunk={beta.pk}" not in page
