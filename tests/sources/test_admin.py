from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from sources.models import Chunk, Collection, Source, SourceSummary

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client: Client, settings: object) -> Client:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    client.force_login(User.objects.create_superuser("root", "root@example.com", "pw-root-123"))
    return client


@pytest.fixture
def data() -> dict[str, Source]:
    manuals = Collection.objects.create(name="manuals", description="Product manuals")
    private = Collection.objects.create(name="private")
    now = timezone.now()
    gateway = Source.objects.create(
        collection=manuals,
        root="/kb",
        path="gateway.md",
        title="Gateway manual",
        kind="md",
        status="ingested",
        chunk_count=2,
        ingested_at=now,
    )
    sheet = Source.objects.create(
        collection=private,
        root="/kb",
        path="sheet.pdf",
        title="AX-200 datasheet",
        kind="pdf",
        status="failed",
        reason="encrypted PDF",
    )
    Chunk.objects.create(
        source=gateway,
        ordinal=0,
        text="The gateway needs 24 V DC.",
        heading="Manual > Power",
        line_start=1,
        line_end=3,
        token_count=8,
    )
    Chunk.objects.create(
        source=gateway,
        ordinal=1,
        text="Up to 8 sensors on the bus.",
        heading="Manual > Bus",
        line_start=4,
        line_end=6,
        token_count=8,
    )
    SourceSummary.objects.create(source=gateway, text="A manual for the gateway.", model="scripted/summary")
    return {"gateway": gateway, "sheet": sheet}


def result_list(client: Client, url: str, **params: str) -> list:
    response = client.get(url, params)
    assert response.status_code == 200
    return list(response.context["cl"].result_list)


def test_changelists_and_detail_pages_load(admin_client: Client, data: dict[str, Source]) -> None:
    assert len(result_list(admin_client, "/admin/sources/source/")) == 2
    assert len(result_list(admin_client, "/admin/sources/chunk/")) == 2
    assert len(result_list(admin_client, "/admin/sources/collection/")) == 2
    assert len(result_list(admin_client, "/admin/sources/sourcesummary/")) == 1
    gateway = data["gateway"]
    page = admin_client.get(f"/admin/sources/source/{gateway.pk}/change/")
    assert page.status_code == 200 and b"2 chunks" in page.content
    chunk = Chunk.objects.first()
    assert admin_client.get(f"/admin/sources/chunk/{chunk.pk}/change/").status_code == 200


def test_search_and_filters(admin_client: Client, data: dict[str, Source]) -> None:
    assert result_list(admin_client, "/admin/sources/source/", q="datasheet") == [data["sheet"]]
    assert result_list(admin_client, "/admin/sources/source/", q="gateway.md") == [data["gateway"]]
    assert result_list(admin_client, "/admin/sources/source/", status__exact="failed") == [data["sheet"]]
    assert [c.ordinal for c in result_list(admin_client, "/admin/sources/chunk/", q="24 V")] == [0]
    assert [c.ordinal for c in result_list(admin_client, "/admin/sources/chunk/", q="Bus")] == [1]
    manuals = Collection.objects.get(name="manuals")
    assert len(result_list(admin_client, "/admin/sources/chunk/", source__collection__id__exact=str(manuals.pk))) == 2


def test_sources_and_chunks_are_read_only(admin_client: Client, data: dict[str, Source]) -> None:
    assert admin_client.get("/admin/sources/source/add/").status_code == 403
    assert admin_client.get("/admin/sources/chunk/add/").status_code == 403
    gateway = data["gateway"]
    admin_client.post(f"/admin/sources/source/{gateway.pk}/change/", {"title": "Changed"})
    assert Source.objects.get(pk=gateway.pk).title == "Gateway manual"
    assert admin_client.post(f"/admin/sources/source/{gateway.pk}/delete/", {"post": "yes"}).status_code == 403
    assert Source.objects.filter(pk=gateway.pk).exists()


def test_collections_are_editable(admin_client: Client, data: dict[str, Source]) -> None:
    reader = User.objects.create_user("rita")
    response = admin_client.post(
        "/admin/sources/collection/add/",
        {"name": "reports", "description": "Test reports", "public": "on", "readers": [reader.pk]},
    )
    assert response.status_code == 302
    reports = Collection.objects.get(name="reports")
    assert reports.public and list(reports.readers.all()) == [reader]
    admin_client.post(
        f"/admin/sources/collection/{reports.pk}/change/",
        {"name": "renamed", "description": "Lab reports", "readers": []},
    )
    reports.refresh_from_db()
    assert (reports.name, reports.description, reports.public) == ("reports", "Lab reports", False)
    assert not reports.readers.exists()


def test_audit_rows_show_every_field_read_only(admin_client: Client) -> None:
    """The query log and generation runs are all editable=False fields: the admin page shows them anyway."""
    from generation.models import GenerationRun
    from generation.audit_chain import query_record

    row = query_record(
        run_id="q-1",
        question="How many sensors?",
        mode="hybrid",
        answer="Up to 8 [S1].",
        grounding={"model_output": "Up to 8 sensors [S1]. Also 400 V.", "sentences": []},
        gate={"passed": True},
    )
    page = admin_client.get(f"/admin/generation/querylog/{row.pk}/change/").content.decode()
    for text in ("How many sensors?", "Up to 8 [S1].", "Also 400 V.", "hybrid", "Grounding"):
        assert text in page, text
    assert 'name="question"' not in page  # shown, not editable
    run = GenerationRun.objects.create(
        topic="Wiring guide",
        spec_name="guide",
        spec_version=3,
        spec_body="Write it.",
        grounding={"model_output": "The moon is made of cheese."},
    )
    page = admin_client.get(f"/admin/generation/generationrun/{run.pk}/change/").content.decode()
    for text in ("Wiring guide", "Write it.", "The moon is made of cheese."):
        assert text in page, text
