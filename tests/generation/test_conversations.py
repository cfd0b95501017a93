"""Conversations: follow-ups made standalone from the earlier turns, logged, owned; their pages and API."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.test import Client

from foundry_site.services.tokens import token_create
from generation import asking
from generation.asking import ConversationNotFound, query_answer
from generation.condense import question_standalone
from generation.reader import stored_quotes
from generation.models import Conversation, QueryLog
from generation.conversations import TITLE_CHARS, conversation_title
from sources.models import Chunk
from sources.services.collections import collection_grant, collection_revoke
from tests.conftest import World, login
from tests.generation.conftest import follows_seen
from tests.generation.test_ask_views import sse_events

pytestmark = pytest.mark.django_db

FIRST = "How many sensors can be connected to the RS-485 bus?"
FOLLOW = "And how must it be terminated?"
THIRD = "What about its input voltage?"


def api(user: Any) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Bearer {token_create(username=user.username, name='t').plain}")


def post(client: Client, body: dict) -> Any:
    return client.post("/api/v1/query", json.dumps(body), content_type="application/json")


def cited_sources(row: QueryLog) -> set[str]:
    return set(
        Chunk.objects.filter(pk__in=[c["chunk_id"] for c in row.citations]).values_list("source__path", flat=True)
    )


def test_title_is_the_first_question_on_one_line_and_shortened() -> None:
    assert conversation_title("  How many\n sensors?  ") == "How many sensors?"
    title = conversation_title("sensor " * 100)
    assert len(title) <= TITLE_CHARS and title.endswith("…") and "sensor sensor" in title


def test_a_follow_up_is_made_standalone_from_the_earlier_turns_and_logged(scoped: dict) -> None:
    alice = scoped["alice"]
    _, first = query_answer(user=alice, question=FIRST)
    conversation = first.conversation
    assert conversation.owner == alice and conversation.title == FIRST and first.message == ""
    _, second = query_answer(user=alice, question=FOLLOW, conversation_id=conversation.pk)
    _, third = query_answer(user=alice, question=THIRD, conversation_id=conversation.pk)
    assert [t.pk for t in conversation.turns.order_by("created_at", "pk")] == [first.pk, second.pk, third.pk]
    # The question answered is the one the condensing step makes of the raw message and the earlier ones.
    assert second.message == FOLLOW and second.question == question_standalone(message=FOLLOW, history=[FIRST]).question
    assert third.question == question_standalone(message=THIRD, history=[FIRST, FOLLOW]).question
    assert second.question != FOLLOW
    assert cited_sources(second) == {"alpha-notes.md"}
    conversation.refresh_from_db()
    assert conversation.updated_at >= third.created_at


def test_a_follow_up_is_read_with_the_answer_of_the_turn_whose_topic_it_carries(
    scoped: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    follows = follows_seen(monkeypatch, asking)
    alice = scoped["alice"]
    _, first = query_answer(user=alice, question=FIRST)
    query_answer(user=alice, question=FOLLOW, conversation_id=first.conversation_id)
    standalone = "What does error code E04 mean on the AX-200?"
    query_answer(user=alice, question=standalone, conversation_id=first.conversation_id)
    # what the first answer quoted, read back from its log row (never parsed from the answer's text)
    assert follows == [(), stored_quotes(first.grounding), ()] and follows[1]
    assert all(quote in first.answer for quote in follows[1])


def test_a_new_question_starts_a_new_conversation(scoped: dict) -> None:
    _, one = query_answer(user=scoped["alice"], question=FIRST)
    _, two = query_answer(user=scoped["alice"], question=FIRST)
    assert one.conversation_id != two.conversation_id and Conversation.objects.count() == 2


def test_someone_elses_conversation_does_not_exist_for_you(scoped: dict) -> None:
    _, first = query_answer(user=scoped["alice"], question=FIRST)
    before = QueryLog.objects.count()
    for user in (scoped["bob"], scoped["carol"]):  # carol reads alice's collection: still not her conversation
        with pytest.raises(ConversationNotFound):
            query_answer(user=user, question=FOLLOW, conversation_id=first.conversation_id)
    assert QueryLog.objects.count() == before
    response = post(api(scoped["bob"]), {"question": FOLLOW, "conversation_id": first.conversation_id})
    assert response.status_code == 404 and "conversation_id" in response.json()["detail"]
    bob = login(scoped["bob"])
    assert bob.get(f"/conversations/{first.conversation_id}/").status_code == 404
    assert bob.post(f"/conversations/{first.conversation_id}/", {"question": FOLLOW}).status_code == 404
    assert bob.post("/ask/stream", {"question": FOLLOW, "conversation": first.conversation_id}).status_code == 404
    assert QueryLog.objects.count() == before


def test_an_auditor_reads_a_conversation_but_never_adds_to_it(scoped: dict) -> None:
    _, first = query_answer(user=scoped["alice"], question=FIRST)
    carol = scoped["carol"]
    carol.user_permissions.add(Permission.objects.get(codename="view_querylog"))
    page = login(carol).get(f"/conversations/{first.conversation_id}/").content.decode()
    assert FIRST in page and 'id="ask-form"' not in page and "Asked by alice" in page
    assert login(carol).post(f"/conversations/{first.conversation_id}/", {"question": FOLLOW}).status_code == 404
    assert first.conversation_id in {c["id"] for c in api(carol).get("/api/v1/conversations").json()["items"]}
    assert first.conversation.turns.count() == 1


def test_a_first_question_that_fails_before_it_is_logged_leaves_no_conversation(world: World) -> None:
    response = login(world.users["alice"]).post("/ask/", {"question": FIRST})  # nothing is embedded: 503
    assert response.status_code == 503 and not Conversation.objects.exists()


def test_a_conversation_in_one_collection_stays_there_while_readable(scoped: dict) -> None:
    client = api(scoped["alice"])
    first = post(client, {"question": FIRST, "collection": "alpha"}).json()
    conversation = Conversation.objects.get(pk=first["conversation_id"])
    assert conversation.collection.name == "alpha"
    other = post(client, {"question": FOLLOW, "conversation_id": conversation.pk, "collection": "beta"})
    assert other.status_code == 404  # alice cannot read beta: as if it did not exist
    follow = post(client, {"question": FOLLOW, "conversation_id": conversation.pk}).json()
    assert QueryLog.objects.get(pk=follow["query_id"]).collection_ids == [conversation.collection_id]
    collection_grant(collection="beta", username="alice")
    collection_revoke(collection="alpha", username="alice")
    lost = post(client, {"question": THIRD, "conversation_id": conversation.pk})
    assert lost.status_code == 400 and "no longer read" in lost.json()["detail"]


def test_the_api_carries_conversation_id_for_follow_ups(scoped: dict) -> None:
    client = api(scoped["alice"])
    first = post(client, {"question": FIRST}).json()
    second = post(client, {"question": FOLLOW, "conversation_id": first["conversation_id"]}).json()
    assert second["conversation_id"] == first["conversation_id"] and first["question"] == FIRST
    assert second["question"] == question_standalone(message=FOLLOW, history=[FIRST]).question
    detail = client.get(f"/api/v1/conversations/{first['conversation_id']}").json()
    assert detail["title"] == FIRST and detail["collection"] is None
    assert [(t["query_id"], t["message"]) for t in detail["turns"]] == [
        (first["query_id"], FIRST),
        (second["query_id"], FOLLOW),
    ]
    assert detail["turns"][1]["citations"] and detail["turns"][1]["answer"] == second["answer"]
    listed = client.get("/api/v1/conversations").json()
    assert [c["id"] for c in listed["items"]] == [first["conversation_id"]] and listed["count"] == 1
    for bad in (0, -1, "seven", 2**63):
        response = post(client, {"question": FOLLOW, "conversation_id": bad})
        assert response.status_code == 422 and "conversation_id" in response.content.decode(), bad


def test_the_ask_page_is_a_conversation_without_javascript(scoped: dict) -> None:
    client = login(scoped["alice"])
    started = client.post("/ask/", {"question": FIRST})
    first = QueryLog.objects.get(user=scoped["alice"])
    assert started.status_code == 302
    assert started["Location"] == f"/conversations/{first.conversation_id}/#turn-{first.pk}"
    followed = client.post(f"/conversations/{first.conversation_id}/", {"question": FOLLOW})
    second = QueryLog.objects.exclude(pk=first.pk).get()
    assert followed["Location"] == f"/conversations/{first.conversation_id}/#turn-{second.pk}"
    page = client.get(followed["Location"]).content.decode()
    assert page.index(f'id="turn-{first.pk}"') < page.index(f'id="turn-{second.pk}"')
    assert FIRST in page and FOLLOW in page and "Answered as:" in page and "New conversation" in page
    assert page.count('class="feedback"') == 2 and page.count('id="answer"') == 1  # the newest keeps the ids
    assert f'id="t{first.pk}-source-S1"' in page and f'href="#t{first.pk}-source-S1"' in page
    assert f'value="/conversations/{first.conversation_id}/#turn-{second.pk}"' in page  # feedback comes back here
    blank = client.post(f"/conversations/{first.conversation_id}/", {"question": "  "})
    assert blank.status_code == 400 and FIRST in blank.content.decode()
    home = client.get("/ask/").content.decode()
    assert "Your conversations" in home and f"/conversations/{first.conversation_id}/" in home


def test_the_conversation_list_is_yours_recent_first_and_paginated(scoped: dict) -> None:
    from generation.conversations import conversation_start

    alice, bob = scoped["alice"], scoped["bob"]
    for n in range(27):
        conversation_start(owner=alice, question=f"Alice topic {n}")
    conversation_start(owner=bob, question="Bob's topic")
    page = login(alice).get("/conversations/")
    body = page.content.decode()
    assert "Alice topic 26" in body and "Alice topic 1<" not in body and "Bob's topic" not in body
    assert body.index("Alice topic 26") < body.index("Alice topic 25") and "Page 1 of 2" in body
    second = login(alice).get("/conversations/?page=2").content.decode()
    assert "Alice topic 0" in second and "Alice topic 26" not in second
    assert "Bob's topic" not in login(alice).get("/ask/").content.decode()


@pytest.mark.django_db(transaction=True)
def test_the_stream_continues_a_conversation_sentence_by_sentence(scoped: dict) -> None:
    client = login(scoped["alice"])
    first = sse_events(client.post("/ask/stream", {"question": FIRST}))[-1][1]
    events = sse_events(client.post("/ask/stream", {"question": FOLLOW, "conversation": first["conversation_id"]}))
    answer = events[-1]
    assert answer[0] == "answer" and answer[1]["conversation_id"] == first["conversation_id"]
    row = QueryLog.objects.get(pk=answer[1]["query_id"])
    assert row.message == FOLLOW and "".join(d["text"] for e, d in events if e == "sentence") == row.answer
    assert client.post("/ask/stream", {"question": FOLLOW, "conversation": "x1"}).status_code == 400
