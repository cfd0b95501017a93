"""Hostile text through every way in: the CLI, the JSON API and the web forms.

Questions and generation topics with FTS5 operators, quotes, SQL, NUL bytes,
100 KB of text, emoji, right-to-left and control characters, unpaired UTF-16
surrogates, and empty or blank input. Each must end in a normal answer or
refusal, or in a clear 4xx naming the problem; never a 500 or a traceback.
API payloads with wrong types, missing fields, unknown fields (rejected, 422
naming the field) and oversized bodies (413 with a JSON error).
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from foundry_site.services.tokens import token_create
from generation.models import GenerationRun
from generation.models import QueryFeedback, QueryLog
from sources.models import Source
from sources.services.collections import collection_grant
from sources.services.ingest_jobs import knowledge_base_ingest
from specs import services as spec_services
from tests.conftest import ScriptedLLM, login, record_query
from tests.generation.conftest import MANUAL, echo_reply

pytestmark = pytest.mark.django_db

SPEC = "wiring-guide"
DOCUMENT = "# Sensor bus\n\nUp to 8 sensors can be connected to the RS-485 bus [S1].\n"

# Text that must be answered (or refused for lack of evidence) like any other question.
HOSTILE = {
    "fts5-operators": 'sensors NEAR(bus, 2) OR * AND NOT ^"RS" text: {a b} -c +d',
    "quotes": 'sensors" OR "1"="1 \'\' """ \'unbalanced',
    "sql": "'; DROP TABLE sources_chunk; -- SELECT * FROM auth_user WHERE 1=1 /*",
    "emoji": "🔌🤖 how many sensors on the bus? 👍🏽👨‍👩‍👧",
    "rtl": "كم عدد أجهزة الاستشعار على ناقل RS-485؟ \u202eevil\u202c עברית",
    "control-chars": "sensors\x1b[31m\x07\x08\x7f on the bus",
    "nul-bytes": "sensors\x00 on the\x00 bus",
}
TOO_LONG = "sensor " * 15_000  # 105 KB
EMPTY = {
    "empty": "",
    "blank": "  \t\n  ",
    "only-nul": "\x00\x00",
    "only-control": "\x00\x01\x07\x1b\x7f\x85",
    "only-invisible": "\u200b\u200b\u2028\u00a0\ufeff",
}
# What a terminal's invalid UTF-8 becomes in sys.argv (surrogateescape), or a JSON "\ud800".
UNPAIRED = "sensors \udcff on the \ud800 bus"


def token_client(user: User) -> Client:
    token = token_create(username=user.get_username(), name="hostile")
    return Client(enforce_csrf_checks=True, HTTP_AUTHORIZATION=f"Bearer {token.plain}")


def post_json(client: Client, url: str, body: Any) -> Any:
    raw = body if isinstance(body, (str, bytes)) else json.dumps(body)
    return client.post(f"/api/v1{url}", raw, content_type="application/json")


def reply(messages: list[dict[str, str]]) -> str:
    """A grounded answer for questions, a cited document for generation runs."""
    return DOCUMENT if "Write a short guide" in messages[0]["content"] else echo_reply(messages)


def approve(name: str) -> None:
    author = User.objects.create_user("author")
    reviewer = User.objects.create_user("rita", is_staff=True)
    reviewer.user_permissions.add(Permission.objects.get(codename="approve_featurespec"))
    reviewer = User.objects.get(pk=reviewer.pk)
    spec_services.spec_create(name=name, title="Wiring guide", body="# Guide\n\nWrite a short guide.\n", by=author)
    spec_services.spec_submit(name=name, by=author)
    spec_services.spec_approve(name=name, by=reviewer)


@pytest.fixture
def ready(
    kb: Path, make_user: Callable[..., Any], foundry_config: Any, scripted_llm: ScriptedLLM, settings: Any
) -> User:
    """An indexed manual, a reader, an approved spec, the scripted model and no rate limit."""
    settings.FOUNDRY_QUERY_RATE = 0
    foundry_config(retrieval={"min_chunks": 1})
    (kb / "manual.md").write_text(MANUAL)
    knowledge_base_ingest(target=kb, collection="manuals")
    reader = make_user("alice")
    collection_grant(collection="manuals", username="alice")
    approve(SPEC)
    scripted_llm.reply = reply
    return reader


def cli(*args: str) -> str:
    out = io.StringIO()
    call_command("foundry", *args, stdout=out)
    return out.getvalue()


# --------------------------------------------------------------------------- questions


@pytest.mark.parametrize("question", HOSTILE.values(), ids=HOSTILE.keys())
def test_hostile_question_is_answered_through_the_api(ready: User, question: str) -> None:
    response = post_json(token_client(ready), "/query", {"question": question})
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["answer_class"] in ("normal", "low_confidence", "no_evidence") and body["answer"]
    row = QueryLog.objects.get(pk=body["query_id"])
    assert row.question == " ".join(re.sub("[\x00-\x1f\x7f-\x9f]", " ", question).split())  # control chars: spaces
    assert {c["source"] for c in body["citations"]} <= {"manual.md"}


@pytest.mark.parametrize("question", HOSTILE.values(), ids=HOSTILE.keys())
def test_hostile_question_is_answered_through_the_cli(ready: User, question: str) -> None:
    # "--" ends the options: a question may itself start with "-" (argparse would take it for one).
    printed = cli("query", "--json", "--", question)
    body = json.loads(printed)
    assert body["answer_class"] in ("normal", "low_confidence", "no_evidence")
    assert QueryLog.objects.count() == 1


@pytest.mark.parametrize("question", HOSTILE.values(), ids=HOSTILE.keys())
def test_hostile_question_is_answered_through_the_web_form(ready: User, question: str) -> None:
    client = login(ready)
    response = client.post("/ask/", {"question": question})
    if "\x00" in question:
        # Django's form fields refuse NUL characters, with their own clear message.
        assert response.status_code == 400 and b"Null characters are not allowed" in response.content
        assert QueryLog.objects.count() == 0
        return
    assert response.status_code == 302, response.content[:500]
    page = client.get(response["Location"])
    assert page.status_code == 200
    assert QueryLog.objects.get().answer_class in ("normal", "low_confidence", "no_evidence")


@pytest.mark.django_db(transaction=True)  # the stream answers in its own thread, on its own connection
@pytest.mark.parametrize("question", HOSTILE.values(), ids=HOSTILE.keys())
def test_hostile_question_is_answered_through_the_stream(ready: User, question: str) -> None:
    response = login(ready).post("/ask/stream", {"question": question})
    assert response.status_code == 200
    events = b"".join(response.streaming_content).decode()
    assert "event: answer" in events and "event: error" not in events


@pytest.mark.parametrize(
    "question,message",
    [
        *[(text, "the question is empty") for text in EMPTY.values()],
        (TOO_LONG, "the limit is 4000"),
        (UNPAIRED, "not valid Unicode"),
    ],
    ids=[*EMPTY.keys(), "100-KB", "unpaired-surrogates"],
)
def test_unusable_question_is_a_clear_4xx_everywhere(ready: User, question: str, message: str) -> None:
    api = post_json(token_client(ready), "/query", {"question": question})
    if question is UNPAIRED:  # refused by the request schema, naming the field
        assert api.status_code == 422 and [e["loc"][-1] for e in api.json()["detail"]] == ["question"]
        assert message in api.json()["detail"][0]["msg"]
    else:
        assert api.status_code == 400 and message in api.json()["detail"]
        # A form post cannot carry surrogates (Django decodes it with replacement characters).
        stream = login(ready).post("/ask/stream", {"question": question})
        assert stream.status_code == 400 and message in stream.json()["detail"]
    with pytest.raises(CommandError, match=message):
        cli("query", "--", question)
    assert QueryLog.objects.count() == 0


@pytest.mark.parametrize(
    "question,message",
    [
        ("", "This field is required"),
        ("  \t\n  ", "This field is required"),
        ("\x00\x00", "Null characters are not allowed"),
        (TOO_LONG, "at most 4000 characters"),
    ],
    ids=["empty", "blank", "only-nul", "100-KB"],
)
def test_unusable_question_in_the_web_form_is_a_400_with_the_reason(ready: User, question: str, message: str) -> None:
    response = login(ready).post("/ask/", {"question": question})
    assert response.status_code == 400 and message in response.content.decode()
    assert QueryLog.objects.count() == 0


def test_unpaired_surrogate_in_a_form_post_becomes_a_replacement_character(ready: User) -> None:
    # Raw invalid UTF-8 in a form body: Django decodes it with U+FFFD, so the question is answered.
    client = login(ready)
    response = client.generic(
        "POST", "/ask/", b"question=sensors+%ED%A0%80+bus", content_type="application/x-www-form-urlencoded"
    )
    assert response.status_code == 302
    assert QueryLog.objects.get().question == "sensors \ufffd\ufffd\ufffd bus"


# --------------------------------------------------------------------------- generation topics


@pytest.mark.parametrize("topic", HOSTILE.values(), ids=HOSTILE.keys())
def test_hostile_topic_runs_through_the_api(ready: User, topic: str, django_capture_on_commit_callbacks: Any) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        response = post_json(token_client(ready), "/generate", {"topic": topic, "feature": SPEC})
    assert response.status_code == 202, response.content
    run = GenerationRun.objects.get(pk=response.json()["run_id"])
    assert run.status in (GenerationRun.Status.SUCCEEDED, GenerationRun.Status.FAILED)
    if run.status == GenerationRun.Status.FAILED:
        assert run.error["type"] == "GenerationError" and run.error["message"]
    assert "\x00" not in run.topic


@pytest.mark.parametrize("topic", HOSTILE.values(), ids=HOSTILE.keys())
def test_hostile_topic_runs_through_the_web_form(
    ready: User, topic: str, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        response = login(ready).post("/generate/", {"topic": topic, "feature": SPEC})
    if "\x00" in topic:
        assert response.status_code == 400 and b"Null characters are not allowed" in response.content
        assert not GenerationRun.objects.exists()
        return
    assert response.status_code == 302, response.content[:500]
    assert GenerationRun.objects.get().status in (GenerationRun.Status.SUCCEEDED, GenerationRun.Status.FAILED)


@pytest.mark.parametrize("topic", HOSTILE.values(), ids=HOSTILE.keys())
def test_hostile_topic_runs_through_the_cli(ready: User, topic: str, tmp_path: Path) -> None:
    output = tmp_path / "out.md"
    try:
        cli("generate", "--topic", topic, "--output", str(output), "--yes")
    except CommandError as exc:  # the gate may refuse: then the reason is given, and no file is written
        assert "failed" in str(exc) and not output.exists()
        return
    assert output.read_text().startswith("#")


@pytest.mark.parametrize(
    "topic,message",
    [
        *[(text, "the topic is empty") for text in EMPTY.values()],
        (TOO_LONG, "the limit is 1000"),
        (UNPAIRED, "not valid Unicode"),
    ],
    ids=[*EMPTY.keys(), "100-KB", "unpaired-surrogates"],
)
def test_unusable_topic_is_a_clear_error_everywhere(
    ready: User, topic: str, message: str, tmp_path: Path, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        api = post_json(token_client(ready), "/generate", {"topic": topic, "feature": SPEC})
    assert api.status_code in (400, 422), api.content
    detail = api.json()["detail"]
    assert message in detail if isinstance(detail, str) else any(e["loc"][-1] == "topic" for e in detail)
    with pytest.raises(CommandError, match=message):
        cli("generate", "--topic", topic, "--output", str(tmp_path / "out.md"), "--yes")
    with pytest.raises(CommandError, match=message):
        cli("generate", "--topic", topic, "--output", str(tmp_path / "out.md"), "--dry-run")
    assert not GenerationRun.objects.exists() and not (tmp_path / "out.md").exists()


# --------------------------------------------------------------------------- API payloads


def _feedback_url() -> str:
    return f"/query-log/{record_query(User.objects.get(username='alice')).pk}/feedback"


PAYLOADS = [
    ("/query", {"question": 5}, "question"),
    ("/query", {"question": ["sensors"]}, "question"),
    ("/query", {"question": None}, "question"),
    ("/query", {"question": {"$ne": ""}}, "question"),
    ("/query", {"question": "sensors", "top_k": "ten"}, "top_k"),
    ("/query", {"question": "sensors", "top_k": 2.5}, "top_k"),
    ("/query", {"question": "sensors", "mode": 3}, "mode"),
    ("/query", {}, "question"),
    ("/query", {"question": "sensors", "topk": 3}, "topk"),
    ("/query", {"question": "sensors", "Question": "other"}, "Question"),
    ("/generate", {"topic": 5, "feature": SPEC}, "topic"),
    ("/generate", {"feature": SPEC}, "topic"),
    ("/generate", {"topic": "sensors", "featrue": SPEC}, "featrue"),
    ("/generate", {"topic": "sensors", "feature": ["a", "b"]}, "feature"),
    ("/generate", {"topic": "sensors", "feature": "wiring\ud800"}, "feature"),
    ("feedback", {"verdict": 1}, "verdict"),
    ("feedback", {}, "verdict"),
    ("feedback", {"verdict": "correct", "notes": "typo in the field name"}, "notes"),
    ("feedback", {"verdict": "correct", "note": "bad \udcff bytes"}, "note"),
]


@pytest.mark.parametrize(
    "url,body,field", PAYLOADS, ids=[f"{u.strip('/')}-{n}-{f}" for n, (u, _, f) in enumerate(PAYLOADS)]
)
def test_bad_payload_is_422_naming_the_field(ready: User, url: str, body: dict, field: str) -> None:
    url = _feedback_url() if url == "feedback" else url
    before = (QueryLog.objects.count(), GenerationRun.objects.count(), QueryFeedback.objects.count())
    response = post_json(token_client(ready), url, body)
    assert response.status_code == 422, response.content
    errors = response.json()["detail"]
    assert any(e["loc"][-1] == field for e in errors), errors
    assert (QueryLog.objects.count(), GenerationRun.objects.count(), QueryFeedback.objects.count()) == before


@pytest.mark.parametrize("raw", ["not json", '{"question": ', b"\xff\xfe\x00garbage", "question=sensors"])
def test_body_that_is_not_json_is_a_400(ready: User, raw: str | bytes) -> None:
    response = post_json(token_client(ready), "/query", raw)
    assert response.status_code == 400 and response.json() == {"detail": "Cannot parse request body"}


@pytest.mark.parametrize("raw", ["[1, 2]", '"sensors"', "null", "42"])
def test_json_that_is_not_an_object_is_a_422(ready: User, raw: str) -> None:
    response = post_json(token_client(ready), "/query", raw)
    assert response.status_code == 422 and response.json()["detail"]


@pytest.mark.parametrize(
    "url",
    ["/runs/{big}", "/runs/{big}/download", "/query-log/{big}", "/sources/{big}/chunks/1", "/sources/1/chunks/{big}"],
)
def test_ids_beyond_64_bits_are_a_4xx(ready: User, url: str) -> None:
    response = token_client(ready).get("/api/v1" + url.format(big=10**25))
    assert response.status_code in (404, 422) and response.json()["detail"]


def test_delete_with_an_id_beyond_64_bits_is_a_4xx(ready: User) -> None:
    ready.is_staff = True
    ready.save()
    response = token_client(ready).delete(f"/api/v1/sources/{10**25}")
    assert response.status_code in (404, 422) and response.json()["detail"]


@pytest.mark.parametrize(
    "url", ["/sources?page={big}", "/query-log?page={big}", "/runs?page={big}", "/specs?page={big}"]
)
def test_page_numbers_beyond_64_bits_are_a_4xx_or_empty(ready: User, url: str) -> None:
    response = token_client(ready).get("/api/v1" + url.format(big=10**25))
    assert response.status_code in (200, 422), response.content
    body = response.json()
    assert body["detail"] if response.status_code == 422 else body["items"] == []


def test_a_page_size_beyond_64_bits_is_clamped(ready: User) -> None:
    response = token_client(ready).get(f"/api/v1/specs?page_size={10**25}")
    assert response.status_code == 200 and response.json()["count"] == len(response.json()["items"])


# --------------------------------------------------------------------------- oversized bodies


def test_huge_json_body_is_413_with_a_json_error(ready: User, settings: Any) -> None:
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    response = post_json(token_client(ready), "/query", {"question": "x" * (limit + 1)})
    assert response.status_code == 413 and response["Content-Type"].startswith("application/json")
    assert f"the limit is {limit} bytes" in response.json()["detail"]
    feedback = post_json(token_client(ready), _feedback_url(), {"verdict": "correct", "note": "x" * (limit + 1)})
    assert feedback.status_code == 413 and "limit" in feedback.json()["detail"]
    assert QueryLog.objects.count() == 1 and not QueryFeedback.objects.exists()  # only _feedback_url()'s row


def test_huge_upload_is_413_with_a_json_error(ready: User, foundry_config: Any, settings: Any) -> None:
    foundry_config(ingest={"max_file_mb": 1})
    client = token_client(ready)
    body = b"sensor text\n" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE // 12 + 200_000)  # > 1 MB + the form limit
    response = client.post(
        "/api/v1/sources", {"collection": "manuals", "file": SimpleUploadedFile("big.txt", body, "text/plain")}
    )
    assert response.status_code == 413 and "limit" in response.json()["detail"]
    # Just over max_file_mb: the upload service names the file limit.
    over = client.post(
        "/api/v1/sources",
        {"collection": "manuals", "file": SimpleUploadedFile("over.txt", b"x" * 1_200_000, "text/plain")},
    )
    assert over.status_code == 413 and "max_file_mb" in over.json()["detail"]
    assert not Source.objects.filter(path__in=["big.txt", "over.txt"]).exists()


def test_huge_form_field_in_an_upload_is_413_with_a_json_error(ready: User, settings: Any) -> None:
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 10_000
    response = token_client(ready).post(
        "/api/v1/sources",
        {"collection": "m" * 20_000, "file": SimpleUploadedFile("a.txt", b"sensor text", "text/plain")},
    )
    assert response.status_code == 413 and "limit" in response.json()["detail"]


def test_too_many_form_fields_is_a_400_with_a_json_error(ready: User) -> None:
    fields = {f"f{i}": "x" for i in range(1500)}
    response = token_client(ready).post(
        "/api/v1/sources",
        {**fields, "collection": "manuals", "file": SimpleUploadedFile("a.txt", b"sensor text", "text/plain")},
    )
    assert response.status_code == 400 and "fields" in response.json()["detail"]


def test_huge_web_form_is_413_not_a_bare_400(ready: User, settings: Any) -> None:
    response = login(ready).post("/ask/", {"question": "x" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1)})
    assert response.status_code == 413 and "limit" in response.content.decode()
    assert QueryLog.objects.count() == 0
