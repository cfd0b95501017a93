from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from foundry_site.services.tokens import token_create, token_revoke
from sources.models import Collection, Source
from tests.conftest import World

pytestmark = pytest.mark.django_db


class Api:
    """A test client that sends ``Authorization: Bearer`` for one user."""

    def __init__(self, username: str) -> None:
        self.token = token_create(username=username, name="test")
        self.client = Client(enforce_csrf_checks=True, HTTP_AUTHORIZATION=f"Bearer {self.token.plain}")

    def get(self, url: str, **kw: Any) -> Any:
        return self.client.get(f"/api/v1{url}", **kw)

    def post(self, url: str, data: dict) -> Any:
        return self.client.post(f"/api/v1{url}", data)

    def delete(self, url: str) -> Any:
        return self.client.delete(f"/api/v1{url}")


@pytest.fixture
def api(world: World) -> Callable[[str], Api]:
    return Api


def refused(client: Client) -> str:
    response = client.get("/api/v1/sources")
    assert response.status_code == 401 and response["WWW-Authenticate"] == 'Bearer realm="foundry"'
    return response.json()["detail"]


def test_no_bad_or_revoked_token_is_401_saying_why(world: World, api: Callable[[str], Api]) -> None:
    missing = refused(Client())
    assert missing.startswith("Authentication required: send Authorization: Bearer <token>")
    assert "foundry tokens create USER" in missing and "signed in" in missing
    assert refused(Client(HTTP_AUTHORIZATION="Basic YWxpY2U6eA==")) == missing
    assert refused(Client(HTTP_AUTHORIZATION="Bearer ")) == missing
    assert refused(Client(HTTP_AUTHORIZATION="Bearer abc123")).startswith("The bearer token sent is malformed")
    assert refused(Client(HTTP_AUTHORIZATION="Bearer fdy_nope")).startswith("The bearer token sent is unknown")
    alice = api("alice")
    assert alice.get("/sources").status_code == 200
    token_revoke(token_id=alice.token.token.pk)
    assert alice.get("/sources").status_code == 401
    assert alice.get("/sources").json()["detail"].startswith("The bearer token sent was revoked")
    bob = api("bob")
    bob.token.token.user.is_active = False
    bob.token.token.user.save()
    assert bob.get("/sources").json()["detail"].startswith("The bearer token sent belongs to a deactivated user")
    # Unsafe methods without credentials are 401 too, not a CSRF 403.
    assert Client(enforce_csrf_checks=True).post("/api/v1/sources", {}).status_code == 401
    assert Client(enforce_csrf_checks=True).delete(f"/api/v1/sources/{world.sources['alpha'].pk}").status_code == 401


def test_list_is_scoped(world: World, api: Callable[[str], Api]) -> None:
    body = api("alice").get("/sources").json()
    assert body["count"] == 2
    assert [(s["collection"], s["path"]) for s in body["items"]] == [("alpha", "alpha.md"), ("handbook", "handbook.md")]
    item = body["items"][0]
    assert set(item) == {
        "id",
        "collection",
        "path",
        "title",
        "kind",
        "status",
        "reason",
        "chunk_count",
        "size",
        "created_at",
        "ingested_at",
    }
    assert item["chunk_count"] == 2 and item["status"] == "ingested"
    for other in ("beta", "nope"):  # a collection alice cannot read is like one that does not exist: 404
        refused = api("alice").get(f"/sources?collection={other}")
        assert refused.status_code == 404
        assert refused.json() == {"detail": f"No collection '{other}' that you can read."}
    assert api("alice").get("/sources?collection=alpha").json()["count"] == 1
    assert api("root").get("/sources").json()["count"] == 3


def test_list_paginates_and_filters(world: World, api: Callable[[str], Api]) -> None:
    coll = world.collections["alpha"]
    Source.objects.bulk_create(
        [
            Source(collection=coll, root="/nowhere", path=f"f{i:03}.txt", status=Source.Status.FAILED, reason="broken")
            for i in range(7)
        ]
    )
    alice = api("alice")
    page1 = alice.get("/sources?page_size=4&page=1").json()
    page3 = alice.get("/sources?page_size=4&page=3").json()
    assert page1["count"] == 9 and len(page1["items"]) == 4 and len(page3["items"]) == 1
    failed = alice.get("/sources?status=failed").json()
    assert failed["count"] == 7 and failed["items"][0]["reason"] == "broken"
    assert alice.get("/sources?status=bogus").status_code == 422
    assert alice.get("/sources?page=0").status_code == 422


def test_chunk_is_readable_in_scope_only(world: World, api: Callable[[str], Api]) -> None:
    chunk = world.chunks["alpha"][0]
    body = api("alice").get(f"/sources/{chunk.source_id}/chunks/{chunk.pk}").json()
    assert body == {
        "id": chunk.pk,
        "source_id": chunk.source_id,
        "source_path": "alpha.md",
        "source_title": "alpha.md",
        "collection": "alpha",
        "ordinal": 0,
        "text": chunk.text,
        "heading": "Alpha",
        "page_start": None,
        "page_end": None,
        "line_start": 1,
        "line_end": 1,
        "location": "§ Alpha, line 1",
        "ocr_confidence": None,
    }
    beta = world.chunks["beta"][0]
    bob_cannot = api("alice").get(f"/sources/{beta.source_id}/chunks/{beta.pk}")
    assert bob_cannot.status_code == 404 and bob_cannot.json() == {"detail": "Not Found"}
    # Guessing: a readable source id with another source's chunk id.
    assert api("alice").get(f"/sources/{chunk.source_id}/chunks/{beta.pk}").status_code == 404
    assert api("alice").get(f"/sources/{chunk.source_id}/chunks/abc").status_code == 422


def upload(api: Api, name: str, content: bytes, **fields: Any) -> Any:
    return api.post("/sources", {"file": SimpleUploadedFile(name, content), **fields})


def test_upload_creates_and_ingests(world: World, api: Callable[[str], Api]) -> None:
    response = upload(api("alice"), "../../x/relay.md", b"# Relay\n\nThe relay trips at 30 A.\n", collection="alpha")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["name"] == "relay.md" and body["status"] == "ingested" and body["chunks"] == 1
    assert body["source"]["collection"] == "alpha" and body["source"]["path"] == "relay.md"
    again = upload(api("alice"), "relay.md", b"# Relay\n\nChanged.\n", collection="alpha")
    assert again.status_code == 409 and "already exists" in again.json()["detail"]
    replaced = upload(api("alice"), "relay.md", b"# Relay\n\nChanged.\n", collection="alpha", replace="true")
    assert replaced.status_code == 201 and replaced.json()["replaced"] is True
    Collection.objects.create(name="default").readers.add(world.users["alice"])
    unnamed = upload(api("alice"), "pump.md", b"# Pump\n\nThe pump runs at 3 bar.\n")  # as the upload page does
    assert unnamed.status_code == 201 and unnamed.json()["source"]["collection"] == "default"


def test_upload_errors(world: World, api: Callable[[str], Api], foundry_config: Callable[..., Any]) -> None:
    alice = api("alice")
    bad_type = upload(alice, "tool.exe", b"MZ", collection="alpha")
    assert bad_type.status_code == 400 and "unsupported file type" in bad_type.json()["detail"]
    assert upload(alice, "fake.pdf", b"hello", collection="alpha").status_code == 400
    hidden = upload(alice, "x.txt", b"hi", collection="beta")  # not readable: 404, as one that does not exist
    missing = upload(alice, "x.txt", b"hi", collection="nope")
    assert hidden.status_code == missing.status_code == 404
    assert hidden.json() == {"detail": "No collection 'beta' that you can read."}
    assert missing.json() == {"detail": "No collection 'nope' that you can read."}
    no_default = upload(alice, "x.txt", b"hi")  # no collection named: "default", which this world does not have
    assert no_default.json() == {"detail": "No collection 'default' that you can read."}
    public = upload(alice, "x.txt", b"hi", collection="handbook")  # readable, but not a reader
    assert public.status_code == 403
    assert alice.post("/sources", {"collection": "alpha"}).status_code == 422  # no file
    foundry_config(ingest={"max_file_mb": 0.001})
    too_large = upload(alice, "big.txt", b"a" * 5000, collection="alpha")
    assert too_large.status_code == 413 and "too large" in too_large.json()["detail"]
    assert not Source.objects.filter(path__in=["tool.exe", "fake.pdf", "x.txt", "big.txt"]).exists()


def test_delete_is_staff_only_and_scoped(world: World, api: Callable[[str], Api]) -> None:
    alpha, beta = world.sources["alpha"], world.sources["beta"]
    assert api("alice").delete(f"/sources/{alpha.pk}").status_code == 403
    carol = api("carol")
    assert carol.delete(f"/sources/{beta.pk}").status_code == 404
    assert carol.delete(f"/sources/{alpha.pk}").status_code == 204
    assert carol.delete(f"/sources/{alpha.pk}").status_code == 404
    assert not Source.objects.filter(pk=alpha.pk).exists() and Source.objects.filter(pk=beta.pk).exists()


def test_unknown_paths_and_methods_are_json_errors(world: World, api: Callable[[str], Api]) -> None:
    alice = api("alice")
    for path in ("/nonexistent", "/runs/1/nothing", "/sources/1/chunks/x/y"):
        missing = alice.get(path)
        assert missing.status_code == 404 and missing.json() == {"detail": f"No API endpoint at /api/v1{path}."}
    refused = alice.client.put("/api/v1/query", "{}", content_type="application/json")
    assert refused.status_code == 405 and refused["Allow"] == "POST"
    assert refused.json() == {"detail": "PUT is not allowed on /api/v1/query; use POST."}
    assert alice.get("/sources/999999/chunks/1").json() == {"detail": "Not Found"}  # an endpoint's own 404 stays


def test_session_auth_enforces_csrf_on_unsafe_methods(world: World) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(world.users["carol"])
    assert client.get("/api/v1/sources").status_code == 200
    alpha = world.sources["alpha"]
    refused = client.delete(f"/api/v1/sources/{alpha.pk}")
    assert refused.status_code == 403 and refused.json() == {"detail": "CSRF check failed"}
    client.get("/sources/")  # sets the CSRF cookie
    token = client.cookies["csrftoken"].value
    assert client.delete(f"/api/v1/sources/{alpha.pk}", HTTP_X_CSRFTOKEN=token).status_code == 204


def test_openapi_schema_documents_every_endpoint(world: World) -> None:
    client = Client()
    client.force_login(world.users["alice"])
    schema = client.get("/api/v1/openapi.json").json()
    paths = schema["paths"]
    assert set(paths["/api/v1/sources"]) == {"get", "post"}
    assert set(paths["/api/v1/sources/{source_id}"]) == {"delete"}
    assert set(paths["/api/v1/sources/{source_id}/chunks/{chunk_id}"]) == {"get"}
    assert {"201", "400", "401", "404", "409", "413"} <= set(paths["/api/v1/sources"]["post"]["responses"])
    schemes = schema["components"]["securitySchemes"]
    assert schemes["BearerTokenAuth"] == {"type": "http", "scheme": "bearer"}
    assert "SessionCsrfAuth" in schemes
    chunk = schema["components"]["schemas"]["ChunkOut"]["properties"]
    assert {"text", "heading", "page_start", "line_start", "source_path", "location"} <= set(chunk)
    assert "context" not in chunk  # the embedding prefix is never exposed as source text
