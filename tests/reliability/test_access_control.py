"""Access control over every page and every API operation: user B never reaches user A's things.

Every URL pattern (Django's resolver) and every API operation (the ninja
OpenAPI schema) must have a case here; a new endpoint without one fails
``test_every_*_has_a_case``. A and B each read one private collection. B tries
A's sources, chunks, citations, generation runs and downloads, query-log rows
and feedback: by guessing ids, by path traversal, and through cached answers.
Anonymous callers get 401 (API) or the login page; every state-changing form
needs its CSRF token; a revoked token fails; tokens and API keys never reach
foundry.log, the query log or the audit pages and CSV.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from foundry_site.services.tokens import token_create, token_revoke
from generation.models import GenerationRun
from generation.models import QueryFeedback, QueryLog
from sources.models import Chunk, Source
from sources.services.collections import collection_create, collection_grant, collection_revoke
from sources.services.ingest_jobs import knowledge_base_ingest
from specs import services as spec_services
from tests.conftest import ScriptedLLM
from tests.generation.conftest import echo_reply

pytestmark = pytest.mark.django_db

# The same question has an answer in each private collection, with a different fact.
QUESTION = "How many sensors can the Falcon gateway connect to its RS-485 bus?"
A_DOC = (
    "# Falcon gateway (alpha team)\n\n## Sensor bus\n\nThe Falcon gateway connects up to 12 sensors to its "
    "RS-485 bus.\n"
)
B_DOC = (
    "# Falcon gateway (beta team)\n\n## Sensor bus\n\nThe Falcon gateway connects up to 40 sensors to its RS-485 bus.\n"
)
A_FACT, B_FACT = "12 sensors", "40 sensors"
DOCUMENT = "# Falcon\n\nThe Falcon gateway connects up to 12 sensors to its RS-485 bus [S1].\n"
LLM_KEY = "sk-live-THIS-KEY-MUST-NEVER-BE-LOGGED-0123456789"


def reply(messages: list[dict[str, str]]) -> str:
    return DOCUMENT if "Write a short guide" in messages[0]["content"] else echo_reply(messages)


@dataclass
class World:
    alice: User
    bob: User
    tokens: dict[str, str]
    a_source: Source
    a_chunk: Chunk
    b_source: Source
    a_query: QueryLog
    a_run: GenerationRun
    a_feedback: QueryFeedback
    secrets: list[str] = field(default_factory=list)

    def api(self, who: str) -> Client:
        return Client(enforce_csrf_checks=True, HTTP_AUTHORIZATION=f"Bearer {self.tokens[who]}")

    def web(self, who: str, *, csrf: bool = False) -> Client:
        client = Client(enforce_csrf_checks=csrf)
        client.force_login(getattr(self, who))
        return client


def _approve_spec() -> None:
    author = User.objects.create_user("author")
    reviewer = User.objects.create_user("rita", is_staff=True)
    reviewer.user_permissions.add(Permission.objects.get(codename="approve_featurespec"))
    reviewer = User.objects.get(pk=reviewer.pk)
    spec_services.spec_create(name="guide", title="Guide", body="# Guide\n\nWrite a short guide.\n", by=author)
    spec_services.spec_submit(name="guide", by=author)
    spec_services.spec_approve(name="guide", by=reviewer)


@pytest.fixture
def world(
    kb: Path,
    make_user: Callable[..., Any],
    foundry_config: Any,
    scripted_llm: ScriptedLLM,
    settings: Any,
    monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: Any,
) -> World:
    """A and B, each the only reader of a private collection holding an answer to QUESTION.

    A has asked QUESTION (answer cached, citing A's document), given feedback,
    and generated a document from A's sources.
    """
    settings.FOUNDRY_QUERY_RATE = 0
    monkeypatch.setenv("OPENAI_API_KEY", LLM_KEY)
    foundry_config(retrieval={"min_chunks": 1})
    scripted_llm.reply = reply
    alice, bob = make_user("alice"), make_user("bob")
    for name, user, text in (("a-private", "alice", A_DOC), ("b-private", "bob", B_DOC)):
        collection_create(name=name)
        collection_grant(collection=name, username=user)
        (kb / name).mkdir()
        (kb / name / f"{name}.md").write_text(text)
        knowledge_base_ingest(target=kb / name, collection=name)
    _approve_spec()
    tokens = {who: token_create(username=who, name="suite").plain for who in ("alice", "bob")}
    alice_api = Client(HTTP_AUTHORIZATION=f"Bearer {tokens['alice']}")
    asked = alice_api.post("/api/v1/query", json.dumps({"question": QUESTION}), content_type="application/json")
    assert asked.status_code == 200 and A_FACT in asked.json()["answer"], asked.content
    query = QueryLog.objects.get(pk=asked.json()["query_id"])
    feedback = alice_api.post(
        f"/api/v1/query-log/{query.pk}/feedback",
        json.dumps({"verdict": "correct", "note": "alpha note"}),
        content_type="application/json",
    )
    assert feedback.status_code == 201
    with django_capture_on_commit_callbacks(execute=True):
        started = alice_api.post(
            "/api/v1/generate",
            json.dumps({"topic": "Falcon sensor bus", "feature": "guide"}),
            content_type="application/json",
        )
    run = GenerationRun.objects.get(pk=started.json()["run_id"])
    assert run.status == GenerationRun.Status.SUCCEEDED, run.error
    a_source = Source.objects.get(collection__name="a-private")
    return World(
        alice=alice,
        bob=bob,
        tokens=tokens,
        a_source=a_source,
        a_chunk=a_source.chunks.first(),
        b_source=Source.objects.get(collection__name="b-private"),
        a_query=query,
        a_run=run,
        a_feedback=QueryFeedback.objects.get(query=query),
        secrets=[*tokens.values(), LLM_KEY],
    )


# --------------------------------------------------------------------------- enumeration


def url_patterns(resolvers: list[Any] | None = None, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(route, pattern) for every URL pattern, with the prefixes of the includes it sits in."""
    for entry in get_resolver().url_patterns if resolvers is None else resolvers:
        route = prefix + str(entry.pattern)
        if isinstance(entry, URLResolver):
            yield from url_patterns(entry.url_patterns, route)
        elif isinstance(entry, URLPattern):
            yield route, entry


def web_routes() -> set[str]:
    """Every page route; the admin counts as one (it is Django's, staff only), the API is enumerated below."""
    routes = set()
    for route, _ in url_patterns():
        if route.startswith("admin/"):
            routes.add("admin/")
        elif route.startswith("api/v1/") and route not in ("api/v1/docs", "api/v1/openapi.json"):
            continue
        else:
            routes.add(route)
    return routes


def api_operations(world: World) -> set[str]:
    schema = world.web("alice").get("/api/v1/openapi.json").json()
    return {f"{method.upper()} {path}" for path, ops in schema["paths"].items() for method in ops}


# --------------------------------------------------------------------------- web cases
# Each case gets the world and asserts what B (and an anonymous visitor) may do.


def _hidden(world: World, response: Any, *texts: str) -> None:
    assert response.status_code == 200
    body = response.content.decode()
    for text in texts:
        assert text not in body, text


def _not_found(response: Any) -> None:
    assert response.status_code == 404, (response.status_code, response.content[:200])


def _needs_csrf(world: World, url: str, data: dict) -> None:
    """A state-changing form refuses a post without the CSRF token, even from the signed-in owner."""
    assert world.web("alice", csrf=True).post(url, data).status_code == 403


WEB_CASES: dict[str, Callable[[World], None]] = {}


def web_case(*routes: str) -> Callable:
    def register(check: Callable[[World], None]) -> Callable[[World], None]:
        for route in routes:
            WEB_CASES[route] = check
        return check

    return register


@web_case("")
def _home(world: World) -> None:
    assert world.web("bob").get("/").status_code == 302


@web_case("favicon.ico")
def _favicon(world: World) -> None:
    # Public like the login page: browsers ask for it unasked; it redirects to a static file and holds no data.
    response = Client().get("/favicon.ico")
    assert response.status_code == 301 and response["Location"].startswith("/static/")


@web_case("accounts/login/")
def _login(world: World) -> None:
    assert Client().get("/accounts/login/").status_code == 200  # the one public page
    _needs_csrf(world, "/accounts/login/", {"username": "alice", "password": "x"})


@web_case("accounts/logout/")
def _logout(world: World) -> None:
    _needs_csrf(world, "/accounts/logout/", {})


@web_case("i18n/setlang/")
def _set_language(world: World) -> None:
    """Open before signing in (the login page has the language selector), but it only sets the language cookie:
    it returns to a page of this site, never elsewhere, and a post needs the CSRF token like every form."""
    client = Client()
    response = client.post("/i18n/setlang/", {"language": "nl", "next": "/sources/"})
    assert response.status_code == 302 and response["Location"] == "/sources/"
    assert client.get("/sources/").status_code == 302  # the page itself still needs a sign-in
    away = Client().post("/i18n/setlang/", {"language": "nl", "next": "https://evil.example/"})
    assert away.status_code in (204, 302) and "evil.example" not in away.get("Location", "")
    _needs_csrf(world, "/i18n/setlang/", {"language": "nl", "next": "/"})


@web_case("sources/")
def _sources(world: World) -> None:
    _hidden(world, world.web("bob").get("/sources/"), world.a_source.path, "a-private")
    _hidden(world, world.web("bob").get("/sources/?collection=a-private"), world.a_source.path)


@web_case("sources/upload")
def _upload(world: World) -> None:
    from django.core.files.uploadedfile import SimpleUploadedFile

    _needs_csrf(world, "/sources/upload", {"collection": "a-private"})
    upload = SimpleUploadedFile("planted.md", b"# Planted\n\nB writes into A's collection.\n", "text/markdown")
    response = world.web("bob").post("/sources/upload", {"collection": world.a_source.collection_id, "file": upload})
    assert response.status_code == 400 and not Source.objects.filter(path="planted.md").exists()


@web_case("sources/<int:source_id>/")
def _source_detail(world: World) -> None:
    _not_found(world.web("bob").get(f"/sources/{world.a_source.pk}/"))
    # A's chunk id on B's own source page is not shown either.
    _not_found(world.web("bob").get(f"/sources/{world.b_source.pk}/?chunk={world.a_chunk.pk}"))


@web_case("sources/<int:source_id>/download")
def _source_download(world: World) -> None:
    _not_found(world.web("bob").get(f"/sources/{world.a_source.pk}/download"))
    for url in (
        f"/sources/{world.b_source.pk}/download/../../{world.a_source.pk}/download",
        f"/sources/{world.b_source.pk}/download?path=../a-private/{world.a_source.path}",
        f"/sources/..%2f{world.a_source.pk}/download",
        "/sources/%2e%2e/%2e%2e/etc/passwd/download",
    ):
        response = world.web("bob").get(url)  # 404, or B's own file (the query string is ignored)
        body = b"".join(response.streaming_content) if response.streaming else response.content
        assert response.status_code in (200, 404) and b"alpha team" not in body


@web_case("sources/<int:source_id>/original")
def _source_original(world: World) -> None:
    Source.objects.filter(pk=world.a_source.pk).update(kind="pdf")  # the one kind served inline
    try:
        _not_found(world.web("bob").get(f"/sources/{world.a_source.pk}/original"))
        for url in (
            f"/sources/{world.b_source.pk}/original/../../{world.a_source.pk}/original",
            f"/sources/..%2f{world.a_source.pk}/original",
        ):
            response = world.web("bob").get(url)
            body = b"".join(response.streaming_content) if response.streaming else response.content
            assert response.status_code == 404 and b"alpha team" not in body
    finally:
        Source.objects.filter(pk=world.a_source.pk).update(kind=world.a_source.kind)


@web_case("sources/<int:source_id>/delete")
def _source_delete(world: World) -> None:
    _needs_csrf(world, f"/sources/{world.a_source.pk}/delete", {})
    _not_found(world.web("bob").post(f"/sources/{world.a_source.pk}/delete"))
    assert Source.objects.filter(pk=world.a_source.pk).exists()


@web_case("ask/")
def _ask(world: World) -> None:
    _needs_csrf(world, "/ask/", {"question": QUESTION})
    _hidden(world, world.web("bob").get("/ask/"), QUESTION)  # A's recent questions are not listed


@web_case("ask/stream")
def _ask_stream(world: World) -> None:
    _needs_csrf(world, "/ask/stream", {"question": QUESTION})
    before = QueryLog.objects.count()
    _not_found(world.web("bob").post("/ask/stream", {"question": "And why?", "conversation": _conversation_id(world)}))
    assert QueryLog.objects.count() == before


def _conversation_id(world: World) -> int:
    return world.a_query.conversation_id


@web_case("conversations/")
def _conversations(world: World) -> None:
    for query in ("", "?page=1", "?page=2"):
        _hidden(
            world,
            world.web("bob").get(f"/conversations/{query}"),
            QUESTION,
            f"/conversations/{_conversation_id(world)}/",
        )


@web_case("conversations/<int:conversation_id>/")
def _conversation(world: World) -> None:
    url = f"/conversations/{_conversation_id(world)}/"
    _needs_csrf(world, url, {"question": "And why?"})
    _not_found(world.web("bob").get(url))
    _not_found(world.web("bob").post(url, {"question": "And why?"}))
    assert world.a_query.conversation.turns.count() == 1


@web_case("ask/<int:query_id>/")
def _ask_result(world: World) -> None:
    _not_found(world.web("bob").get(f"/ask/{world.a_query.pk}/"))


@web_case("runs/")
def _runs(world: World) -> None:
    _hidden(world, world.web("bob").get("/runs/"), world.a_run.topic)


@web_case("runs/<int:run_id>/", "runs/<int:run_id>/status", "runs/<int:run_id>/download")
def _run_pages(world: World) -> None:
    for url in (
        f"/runs/{world.a_run.pk}/",
        f"/runs/{world.a_run.pk}/status",
        f"/runs/{world.a_run.pk}/download",
        f"/runs/{world.a_run.pk}/download?name=../../outputs/run-{world.a_run.pk}.md",
    ):
        _not_found(world.web("bob").get(url))


@web_case("query-log/")
def _querylog(world: World) -> None:
    _hidden(world, world.web("bob").get("/query-log/"), QUESTION, A_FACT)
    _hidden(world, world.web("bob").get("/query-log/?user=alice&q=Falcon"), QUESTION)


@web_case("query-log/export.csv")
def _querylog_csv(world: World) -> None:
    response = world.web("bob").get("/query-log/export.csv?user=alice")
    body = b"".join(response.streaming_content).decode()
    assert response.status_code == 200 and QUESTION not in body and A_FACT not in body


@web_case("query-log/<int:query_id>/")
def _querylog_detail(world: World) -> None:
    _not_found(world.web("bob").get(f"/query-log/{world.a_query.pk}/"))


@web_case("query-log/<int:query_id>/feedback")
def _querylog_feedback(world: World) -> None:
    _needs_csrf(world, f"/query-log/{world.a_query.pk}/feedback", {"verdict": "incorrect"})
    _not_found(world.web("bob").post(f"/query-log/{world.a_query.pk}/feedback", {"verdict": "incorrect"}))
    assert world.a_query.feedback.count() == 1


@web_case("dashboard/")
def _dashboard(world: World) -> None:
    response = world.web("bob").get("/dashboard/")
    assert response.status_code == 200 and response.context["stats"].total == 0


@web_case("generate/")
def _generate(world: World) -> None:
    _needs_csrf(world, "/generate/", {"topic": "x", "feature": "guide"})


@web_case("admin/")
def _admin(world: World) -> None:
    for url in ("/admin/", f"/admin/sources/source/{world.a_source.pk}/change/", "/admin/generation/querylog/"):
        response = world.web("bob").get(url)
        assert response.status_code == 302 and "/admin/login/" in response["Location"]


@web_case("api/v1/docs", "api/v1/openapi.json")
def _api_docs(world: World) -> None:
    assert world.web("bob").get("/api/v1/openapi.json").status_code == 200  # describes, holds no data


@web_case("mcp")
def _mcp(world: World) -> None:
    """The MCP endpoint takes bearer tokens only (401 otherwise, never the login page); what a token's
    user reaches through its tools and resources is in test_mcp_access_control.py."""
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    revoked = token_create(username="bob")
    token_revoke(token_id=revoked.token.pk)
    for client in (Client(), world.web("alice"), Client(HTTP_AUTHORIZATION=f"Bearer {revoked.plain}")):
        assert client.post("/mcp", body, content_type="application/json").status_code == 401
    listed = world.api("bob").post(
        "/mcp", body, content_type="application/json", HTTP_ACCEPT="application/json, text/event-stream"
    )
    assert listed.status_code == 200 and "search" in {t["name"] for t in listed.json()["result"]["tools"]}


@web_case("v1/models", "v1/models/<path:model>", "v1/chat/completions", "v1/<anything:path>")
def _openai_api(world: World) -> None:
    """The OpenAI-compatible API takes bearer tokens only (401 in OpenAI's shape, never the login page or a
    session); B's models are B's collections, A's collection is an unknown model, and B's answers cite B only."""
    revoked = token_create(username="bob")
    token_revoke(token_id=revoked.token.pk)
    ask = json.dumps({"model": "foundry", "messages": [{"role": "user", "content": QUESTION}]})
    for client in (Client(), world.web("alice"), Client(HTTP_AUTHORIZATION=f"Bearer {revoked.plain}")):
        assert client.get("/v1/models").status_code == 401
        assert client.get("/v1/models/foundry").status_code == 401
        assert client.post("/v1/chat/completions", ask, content_type="application/json").status_code == 401
        assert client.get("/v1/a-private").status_code == 401
    assert world.api("bob").get("/v1/a-private").json()["error"]["code"] == "unknown_url"  # for a path, no more
    listed = world.api("bob").get("/v1/models")
    assert [m["id"] for m in listed.json()["data"]] == ["foundry", "foundry/b-private"]
    assert world.api("bob").get("/v1/models/foundry/a-private").status_code == 404
    theirs = json.dumps({"model": "foundry/a-private", "messages": [{"role": "user", "content": QUESTION}]})
    assert world.api("bob").post("/v1/chat/completions", theirs, content_type="application/json").status_code == 404
    for stream in (False, True):  # the same question A asked (cached in A's scope): B gets B's answer only
        body = json.dumps({**json.loads(ask), "stream": stream})
        response = world.api("bob").post("/v1/chat/completions", body, content_type="application/json")
        text = b"".join(response.streaming_content).decode() if stream else response.content.decode()
        assert response.status_code == 200 and B_FACT in text, text[:500]
        assert A_FACT not in text and "a-private" not in text and world.a_source.name not in text
        assert f'"chunk_id": {world.a_chunk.pk},' not in text


def test_every_page_has_a_case(world: World) -> None:
    missing = web_routes() - set(WEB_CASES)
    assert not missing, f"pages without an access-control case in {__name__}: {sorted(missing)}"


def each(
    cases: dict[str, Callable[[World], None]],
    world: World,
    check: Callable[[str], None] | None = None,
    keys: list[str] | None = None,
) -> None:
    """Run every case against one world (building it per case would take minutes); report all failures."""
    failures = []
    for key in keys if keys is not None else sorted(cases):
        try:
            (check or (lambda k: cases[k](world)))(key)
        except AssertionError as exc:
            failures.append(f"{key}: {exc}")
    assert not failures, "\n".join(failures)


def test_pages(world: World) -> None:
    each(WEB_CASES, world)


def test_anonymous_visitor_is_sent_to_login(world: World) -> None:
    def check(route: str) -> None:
        url = "/" + route.replace("<int:source_id>", str(world.a_source.pk)).replace(
            "<int:conversation_id>", str(world.a_query.conversation_id)
        ).replace("<int:query_id>", str(world.a_query.pk)).replace("<int:run_id>", str(world.a_run.pk))
        for method in ("get", "post"):
            response = getattr(Client(), method)(url)
            assert response.status_code == 302 and response["Location"].startswith("/accounts/login/"), method

    # /mcp and /v1/ answer 401 (APIs for agents and chat clients, like /api/v1/): their cases check that.
    # The language selector is open by design (it only sets a cookie): its case checks that.
    each(
        WEB_CASES,
        world,
        check,
        keys=sorted(
            r
            for r in WEB_CASES
            if r not in ("accounts/login/", "i18n/setlang/", "admin/", "mcp", "favicon.ico") and not r.startswith("v1/")
        ),
    )


# --------------------------------------------------------------------------- API cases

API_CASES: dict[str, Callable[[World], None]] = {}


def api_case(*operations: str) -> Callable:
    def register(check: Callable[[World], None]) -> Callable[[World], None]:
        for operation in operations:
            API_CASES[operation] = check
        return check

    return register


def _api_url(world: World, path: str) -> str:
    return path.format(
        source_id=world.a_source.pk,
        chunk_id=world.a_chunk.pk,
        query_id=world.a_query.pk,
        run_id=world.a_run.pk,
        conversation_id=world.a_query.conversation_id,
    )


def _post_json(client: Client, url: str, body: dict) -> Any:
    return client.post(url, json.dumps(body), content_type="application/json")


@api_case("GET /api/v1/sources")
def _api_sources(world: World) -> None:
    items = world.api("bob").get("/api/v1/sources").json()["items"]
    assert world.a_source.pk not in {s["id"] for s in items}
    assert world.api("bob").get("/api/v1/sources?collection=a-private").status_code == 404  # as if it did not exist


@api_case("POST /api/v1/sources")
def _api_upload(world: World) -> None:
    from django.core.files.uploadedfile import SimpleUploadedFile

    upload = SimpleUploadedFile("planted.md", b"# Planted\n\nText.\n", "text/markdown")
    response = world.api("bob").post("/api/v1/sources", {"collection": "a-private", "file": upload})
    assert response.status_code == 404 and not Source.objects.filter(path="planted.md").exists()


@api_case("DELETE /api/v1/sources/{source_id}")
def _api_delete(world: World) -> None:
    assert world.api("bob").delete(f"/api/v1/sources/{world.a_source.pk}").status_code == 404
    assert Source.objects.filter(pk=world.a_source.pk).exists()


@api_case("GET /api/v1/sources/{source_id}/chunks/{chunk_id}")
def _api_chunk(world: World) -> None:
    bob = world.api("bob")
    assert bob.get(f"/api/v1/sources/{world.a_source.pk}/chunks/{world.a_chunk.pk}").status_code == 404
    # A's chunk under B's own source id: still 404.
    assert bob.get(f"/api/v1/sources/{world.b_source.pk}/chunks/{world.a_chunk.pk}").status_code == 404


@api_case("POST /api/v1/query")
def _api_query(world: World) -> None:
    # B asks A's exact question: B's own answer, never A's cached one or A's citations.
    answer = _post_json(world.api("bob"), "/api/v1/query", {"question": QUESTION}).json()
    assert not answer["cached"] and A_FACT not in answer["answer"] and B_FACT in answer["answer"]
    assert {c["source"] for c in answer["citations"]} == {"b-private.md"}
    assert world.a_chunk.pk not in {c["chunk_id"] for c in answer["citations"]}
    # B cannot continue A's conversation: 404, and nothing is asked or logged.
    before = QueryLog.objects.count()
    response = _post_json(
        world.api("bob"), "/api/v1/query", {"question": "And why?", "conversation_id": _conversation_id(world)}
    )
    assert response.status_code == 404 and QueryLog.objects.count() == before


@api_case("GET /api/v1/conversations")
def _api_conversations(world: World) -> None:
    items = world.api("bob").get("/api/v1/conversations").json()["items"]
    assert _conversation_id(world) not in {c["id"] for c in items} and QUESTION not in json.dumps(items)


@api_case("GET /api/v1/conversations/{conversation_id}")
def _api_conversation(world: World) -> None:
    _not_found(world.api("bob").get(f"/api/v1/conversations/{_conversation_id(world)}"))


@api_case("GET /api/v1/query-log")
def _api_querylog(world: World) -> None:
    for query in ("", "?user=alice", "?collection=a-private", "?q=Falcon"):
        items = world.api("bob").get(f"/api/v1/query-log{query}").json()["items"]
        assert world.a_query.pk not in {r["id"] for r in items}


@api_case("GET /api/v1/query-log/{query_id}")
def _api_querylog_detail(world: World) -> None:
    assert world.api("bob").get(f"/api/v1/query-log/{world.a_query.pk}").status_code == 404


@api_case("POST /api/v1/query-log/{query_id}/feedback")
def _api_feedback(world: World) -> None:
    response = _post_json(world.api("bob"), f"/api/v1/query-log/{world.a_query.pk}/feedback", {"verdict": "incorrect"})
    assert response.status_code == 404 and world.a_query.feedback.count() == 1


@api_case("GET /api/v1/runs")
def _api_runs(world: World) -> None:
    assert world.a_run.pk not in {r["id"] for r in world.api("bob").get("/api/v1/runs").json()["items"]}


@api_case("GET /api/v1/runs/{run_id}", "GET /api/v1/runs/{run_id}/download")
def _api_run(world: World) -> None:
    for url in (
        f"/api/v1/runs/{world.a_run.pk}",
        f"/api/v1/runs/{world.a_run.pk}/download",
        f"/api/v1/runs/{world.a_run.pk}/download?filename=../../outputs/run-{world.a_run.pk}.md",
        f"/api/v1/runs/..%2f{world.a_run.pk}/download",
    ):
        assert world.api("bob").get(url).status_code in (404, 422), url


@api_case("GET /api/v1/specs")
def _api_specs(world: World) -> None:
    assert world.api("bob").get("/api/v1/specs").status_code == 200  # approved specs are shared by design


@api_case("POST /api/v1/generate")
def _api_generate(world: World) -> None:
    # B's run searches B's collections only: its chunks never include A's.
    response = _post_json(world.api("bob"), "/api/v1/generate", {"topic": "Falcon sensor bus", "feature": "guide"})
    run = GenerationRun.objects.get(pk=response.json()["run_id"])
    assert run.collection_ids == [Source.objects.get(pk=world.b_source.pk).collection_id]
    assert world.a_run.pk != run.pk and world.api("bob").get(f"/api/v1/runs/{run.pk}").status_code == 200


def test_every_api_operation_has_a_case(world: World) -> None:
    missing = api_operations(world) - set(API_CASES)
    assert not missing, f"API operations without an access-control case in {__name__}: {sorted(missing)}"


def test_api_operations(world: World) -> None:
    each(API_CASES, world)


def test_api_operations_need_a_valid_token(world: World) -> None:
    revoked = token_create(username="alice", name="to revoke")
    token_revoke(token_id=revoked.token.pk)

    def check(operation: str) -> None:
        method, path = operation.split(" ", 1)
        url = _api_url(world, path)
        anonymous = getattr(Client(enforce_csrf_checks=True), method.lower())(url)
        assert anonymous.status_code == 401 and anonymous.json()["detail"].startswith("Authentication required"), (
            "anonymous"
        )
        forged = getattr(Client(HTTP_AUTHORIZATION="Bearer fdy_" + "x" * 43), method.lower())(url)
        assert forged.status_code == 401 and "unknown" in forged.json()["detail"], "forged"
        after = getattr(Client(HTTP_AUTHORIZATION=f"Bearer {revoked.plain}"), method.lower())(url)
        assert after.status_code == 401 and "revoked" in after.json()["detail"], "revoked"

    each(API_CASES, world, check)


def test_api_session_needs_csrf_for_changes(world: World) -> None:
    def check(operation: str) -> None:
        method, path = operation.split(" ", 1)
        response = getattr(world.web("alice", csrf=True), method.lower())(_api_url(world, path))
        assert response.status_code == 403 and response.json() == {"detail": "CSRF check failed"}

    each(API_CASES, world, check, keys=sorted(o for o in API_CASES if not o.startswith("GET ")))


# --------------------------------------------------------------------------- staff and auditors


def _own_query_and_run(user: User) -> tuple[QueryLog, GenerationRun]:
    from tests.conftest import record_query

    run = GenerationRun.objects.create(
        topic="bob's own topic",
        spec_name="guide",
        spec_version=1,
        spec_body="x",
        created_by=user,
        status=GenerationRun.Status.SUCCEEDED,
    )
    scope = [Source.objects.get(collection__name="b-private").collection_id]
    return record_query(user, question="bob's own question", collection_ids=scope), run


def test_staff_status_alone_reads_no_one_elses_runs_or_queries(world: World) -> None:
    """A spec reviewer is staff to use the admin; that must not show A's answers and documents to B."""
    world.bob.is_staff = True
    world.bob.save()
    own_query, own_run = _own_query_and_run(world.bob)
    api, web = world.api("bob"), world.web("bob")
    for url in (
        f"/api/v1/runs/{world.a_run.pk}",
        f"/api/v1/runs/{world.a_run.pk}/download",
        f"/api/v1/query-log/{world.a_query.pk}",
    ):
        _not_found(api.get(url))
    _not_found(_post_json(api, f"/api/v1/query-log/{world.a_query.pk}/feedback", {"verdict": "incorrect"}))
    assert [r["id"] for r in api.get("/api/v1/runs").json()["items"]] == [own_run.pk]
    for query, expected in (("", [own_query.pk]), ("?user=alice", [own_query.pk]), ("?collection=a-private", [])):
        assert [r["id"] for r in api.get(f"/api/v1/query-log{query}").json()["items"]] == expected, query
    for url in (
        f"/runs/{world.a_run.pk}/",
        f"/runs/{world.a_run.pk}/status",
        f"/runs/{world.a_run.pk}/download",
        f"/query-log/{world.a_query.pk}/",
        f"/ask/{world.a_query.pk}/",
        f"/conversations/{world.a_query.conversation_id}/",
    ):
        _not_found(web.get(url))
    _not_found(api.get(f"/api/v1/conversations/{world.a_query.conversation_id}"))
    _hidden(world, web.get("/runs/"), world.a_run.topic)
    _hidden(world, web.get("/query-log/?user=alice"), QUESTION, A_FACT)
    csv_text = b"".join(web.get("/query-log/export.csv").streaming_content).decode()
    assert "bob's own question" in csv_text and QUESTION not in csv_text and A_FACT not in csv_text
    assert web.get("/dashboard/").context["stats"].total == 1
    assert world.a_query.feedback.count() == 1


def test_the_audit_permission_reads_everyones_runs_and_queries(world: World) -> None:
    """Granted in the admin (B is not even staff here): every run and query-log row, with A's answer."""
    world.bob.user_permissions.add(*Permission.objects.filter(codename__in=["view_generationrun", "view_querylog"]))
    api, web = world.api("bob"), world.web("bob")
    assert api.get(f"/api/v1/runs/{world.a_run.pk}").json()["status"] == "succeeded"
    assert A_FACT in b"".join(api.get(f"/api/v1/runs/{world.a_run.pk}/download").streaming_content).decode()
    assert A_FACT in api.get(f"/api/v1/query-log/{world.a_query.pk}").json()["answer"]
    assert world.a_run.pk in {r["id"] for r in api.get("/api/v1/runs").json()["items"]}
    assert world.a_query.pk in {r["id"] for r in api.get("/api/v1/query-log?user=alice").json()["items"]}
    for url in (
        f"/runs/{world.a_run.pk}/",
        f"/runs/{world.a_run.pk}/download",
        f"/query-log/{world.a_query.pk}/",
        f"/conversations/{world.a_query.conversation_id}/",
    ):
        assert web.get(url).status_code == 200, url
    assert api.get(f"/api/v1/conversations/{world.a_query.conversation_id}").json()["turns"][0]["answer"]
    # Reading a conversation is all it grants: B cannot add a turn to A's.
    _not_found(web.post(f"/conversations/{world.a_query.conversation_id}/", {"question": "And why?"}))
    assert (
        _post_json(
            api, "/api/v1/query", {"question": "And why?", "conversation_id": world.a_query.conversation_id}
        ).status_code
        == 404
    )
    assert world.a_run.topic in web.get("/runs/").content.decode()
    assert QUESTION in web.get("/query-log/?user=alice").content.decode()
    # The citations name A's source, which B cannot read: no link, and not "no longer" readable.
    page = web.get(f"/ask/{world.a_query.pk}/").content.decode()
    assert "(not readable by you)" in page and f"/sources/{world.a_source.pk}/" not in page
    # Reading is all it grants: B still cannot judge A's answer (only the asker or a staff auditor may).
    _not_found(_post_json(api, f"/api/v1/query-log/{world.a_query.pk}/feedback", {"verdict": "incorrect"}))


# --------------------------------------------------------------------------- cached answers


def test_same_scope_shares_the_cache_other_scopes_never_do(world: World, make_user: Callable[..., Any]) -> None:
    """Only a caller who can read exactly the same collections may get A's cached answer."""
    make_user("carol")
    collection_grant(collection="a-private", username="carol")
    carol_token = token_create(username="carol", name="t").plain
    same = _post_json(Client(HTTP_AUTHORIZATION=f"Bearer {carol_token}"), "/api/v1/query", {"question": QUESTION})
    assert same.json()["cached"] and A_FACT in same.json()["answer"]
    # The cache key ignores case, so this is A's cache key but for B's scope.
    body = _post_json(world.api("bob"), "/api/v1/query", {"question": QUESTION.upper()}).json()
    assert not body["cached"] and A_FACT not in body["answer"]
    assert "a-private.md" not in {c["source"] for c in body["citations"]}
    web = world.web("bob")
    response = web.post("/ask/", {"question": QUESTION})
    page = web.get(response["Location"]).content.decode()
    assert A_FACT not in page and "alpha team" not in page and B_FACT in page


def test_revoked_reader_no_longer_gets_the_cached_answer(world: World) -> None:
    collection_revoke(collection="a-private", username="alice")
    collection_grant(collection="b-private", username="alice")
    body = _post_json(world.api("alice"), "/api/v1/query", {"question": QUESTION}).json()
    assert not body["cached"] and A_FACT not in body["answer"] and B_FACT in body["answer"]
    assert world.a_chunk.pk not in {c["chunk_id"] for c in body["citations"]}
    # A's own old row stays A's, but its citation no longer links into the collection A lost.
    page = world.web("alice").get(f"/ask/{world.a_query.pk}/").content.decode()
    assert f"/sources/{world.a_source.pk}/" not in page


# --------------------------------------------------------------------------- secrets


def test_tokens_and_keys_never_reach_logs_or_audit(
    world: World, caplog: pytest.LogCaptureFixture, scripted_llm: ScriptedLLM, foundry_config: Any
) -> None:
    """Tokens (valid, forged) and the provider API key stay out of logs, rows, pages and CSV."""
    foundry_config(llm={"retries": 0})
    caplog.set_level(logging.DEBUG)
    log_file = next(h.baseFilename for h in logging.getLogger().handlers if hasattr(h, "baseFilename"))
    start = Path(log_file).stat().st_size if Path(log_file).exists() else 0
    for token in (world.tokens["alice"], "fdy_" + "forged" * 8):
        client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
        client.get("/api/v1/sources")
        _post_json(client, "/api/v1/query", {"question": "What is the Falcon gateway?"})

    # A provider error that echoes the API key (as some do) must not carry it into the audit.
    def leaky(messages: list[dict[str, str]]) -> str:
        raise RuntimeError(f"401 Unauthorized: invalid api key {LLM_KEY}")

    scripted_llm.reply = leaky
    failed = _post_json(world.api("alice"), "/api/v1/query", {"question": "Falcon sensor bus termination?"})
    assert failed.status_code in (502, 503) and LLM_KEY not in failed.content.decode()
    written = Path(log_file).read_bytes()[start:].decode(errors="replace") if Path(log_file).exists() else ""
    rows = json.dumps(list(QueryLog.objects.values()), default=str)
    staff = world.web("alice")
    world.alice.is_staff = True
    world.alice.save()
    pages = "".join(
        staff.get(url).content.decode()
        for url in ["/query-log/", *[f"/query-log/{pk}/" for pk in QueryLog.objects.values_list("pk", flat=True)]]
    )
    csv_text = b"".join(staff.get("/query-log/export.csv").streaming_content).decode()
    runs = json.dumps(list(GenerationRun.objects.values()), default=str)
    for secret in world.secrets:
        for where, text in (
            ("foundry.log", written),
            ("captured log", caplog.text),
            ("QueryLog rows", rows),
            ("audit pages", pages),
            ("audit CSV", csv_text),
            ("GenerationRun rows", runs),
        ):
            assert secret not in text, f"secret found in {where}"
