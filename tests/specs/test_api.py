from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import User
from django.test import Client, RequestFactory

from foundry_site.api import api

from specs import services
from specs.errors import SpecNotFound, SpecPermissionError, SpecSelectionError, SpecTransitionError
from tests.specs.conftest import spec_approved, spec_in_review

pytestmark = pytest.mark.django_db


@pytest.fixture
def client(client: Client, django_user_model: type[User]) -> Client:
    """Every API operation needs a bearer token or a signed-in session; sign one reader in."""
    client.force_login(django_user_model.objects.create_user("api-reader"))
    return client


def test_specs_need_authentication() -> None:
    assert Client().get("/api/v1/specs").status_code == 401


def test_lists_only_approved_specs_paginated(client: Client, author: User, reviewer: User) -> None:
    spec_approved("wiring-guide", author, reviewer)
    spec_approved("install", author, reviewer)
    services.spec_edit(name="install", body="v2", by=author)
    spec_in_review("draft-only", author)
    response = client.get("/api/v1/specs")
    assert response.status_code == 200
    body = response.json()
    assert body["count"] == 2
    assert [(s["name"], s["version"], s["approved_by"]) for s in body["items"]] == [
        ("install", 1, "rita"),
        ("wiring-guide", 1, "rita"),
    ]
    assert body["items"][1]["title"] == "Wiring-Guide" and body["items"][1]["approved_at"]
    page = client.get("/api/v1/specs", {"page": 2, "page_size": 1}).json()
    assert page["count"] == 2 and [s["name"] for s in page["items"]] == ["wiring-guide"]


def test_empty_list(client: Client) -> None:
    assert client.get("/api/v1/specs").json() == {"items": [], "count": 0}


@pytest.mark.parametrize(
    ("error", "status"),
    [(SpecNotFound, 404), (SpecSelectionError, 400), (SpecTransitionError, 409), (SpecPermissionError, 403)],
)
def test_spec_errors_map_to_status_codes(rf: RequestFactory, error: type[Exception], status: int) -> None:
    response = api.on_exception(rf.get("/api/v1/specs"), error("clear message"))
    assert response.status_code == status and json.loads(response.content) == {"detail": "clear message"}


def test_openapi_lists_the_endpoint(client: Client) -> None:
    assert "/api/v1/specs" in client.get("/api/v1/openapi.json").json()["paths"]
