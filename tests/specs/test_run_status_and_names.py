"""A run written with low confidence "needs review" everywhere; downloads are named after spec and topic;
footnotes link to the source viewer for those who can read the source."""

from __future__ import annotations

import re

from typing import Any

import pytest

from generation.models import GenerationRun
from generation.selectors import run_download_name
from sources.models import Chunk, Source
from tests.conftest import ScriptedLLM, login
from tests.specs.test_generate_web import REPLY, TOPIC, api, generate, people, ready  # noqa: F401 (fixtures)

pytestmark = pytest.mark.django_db

LOW = REPLY.rstrip() + " The bus also powers the coffee machine on the second floor [S1].\n"


def test_low_coverage_run_needs_review_on_every_surface(
    ready: ScriptedLLM,
    people: dict,
    make_user: Any,  # noqa: F811
    django_capture_on_commit_callbacks: Any,
) -> None:
    ready.reply = lambda m: LOW
    client = login(people["alice"])
    generate(client, django_capture_on_commit_callbacks)
    run = GenerationRun.objects.get()
    assert run.status == "needs_review" and run.low_confidence and run.coverage == 0.5
    assert run.is_finished and run.wrote_document
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert '<span class="badge needs_review" id="run-status">Needs review</span>' in page
    assert "only 1 of the 2 sentences the model wrote are supported" in page and "Download .md" in page
    assert "http-equiv" not in page  # finished: the page no longer refreshes itself
    listing = client.get("/runs/").content.decode()
    assert '<span class="badge needs_review">Needs review</span>' in listing
    assert client.get(f"/runs/{run.pk}/status").json()["done"] is True
    body = api("alice").get(f"/api/v1/runs/{run.pk}").json()
    assert body["status"] == "needs_review" and body["low_confidence"] is True and body["download"]
    assert api("alice").get(body["download"]).status_code == 200
    root = make_user("root", superuser=True)
    admin = login(root)
    assert (
        f"/admin/generation/generationrun/{run.pk}/change/"
        in admin.get("/admin/generation/generationrun/?status__exact=needs_review").content.decode()
    )
    assert (
        f"/admin/generation/generationrun/{run.pk}/change/"
        not in admin.get("/admin/generation/generationrun/?status__exact=succeeded").content.decode()
    )
    assert "Needs review" in admin.get("/admin/generation/generationrun/").content.decode()  # the list filter


def test_api_schema_names_every_status(people: dict) -> None:  # noqa: F811
    schema = api("alice").get("/api/v1/openapi.json").json()["components"]["schemas"]
    assert schema["RunOut"]["properties"]["status"]["enum"] == [
        "pending",
        "running",
        "succeeded",
        "needs_review",
        "failed",
    ]


@pytest.mark.parametrize(
    ("spec", "topic", "name"),
    [
        ("wiring-guide", "AX200 gateway", "wiring-guide-ax200-gateway.md"),
        ("wiring-guide", "  Wiring: the RS-485 bus / 120 Ω?  ", "wiring-guide-wiring-the-rs-485-bus-120-ω.md"),
        ("install", "Εγκατάσταση πύλης", "install-εγκατάσταση-πύλης.md"),
        ("install", "../../etc/passwd", "install-etcpasswd.md"),
        ("install", "word " * 40, "install" + "-word" * 18 + ".md"),
    ],
)
def test_download_name_is_a_slug_of_spec_and_topic(spec: str, topic: str, name: str) -> None:
    assert run_download_name(GenerationRun(pk=7, spec_name=spec, topic=topic)) == name


def test_old_runs_stored_as_run_id_download_under_the_new_name(people: dict) -> None:  # noqa: F811
    from tests.specs.test_generate_web import make_run

    run = make_run(people["alice"], topic="AX200 gateway")
    assert run.output_path.endswith(f"run-{run.pk}.md")
    response = login(people["alice"]).get(f"/runs/{run.pk}/download")
    assert response["Content-Disposition"] == 'attachment; filename="wiring-guide-ax200-gateway.md"'
    response = api("alice").get(f"/api/v1/runs/{run.pk}/download")
    assert response["Content-Disposition"] == 'attachment; filename="wiring-guide-ax200-gateway.md"'


def test_footnote_links_need_read_access_to_the_source(
    ready: ScriptedLLM,
    people: dict,  # noqa: F811
    django_capture_on_commit_callbacks: Any,
) -> None:
    generate(login(people["alice"]), django_capture_on_commit_callbacks)
    run = GenerationRun.objects.get()
    chunk = Chunk.objects.get(source__name="manual.md", text__contains="Up to 8 sensors")
    link = rf'href="/sources/{chunk.source_id}/\?chunk={chunk.pk}&amp;lines=\d+-\d+#chunk-{chunk.pk}"'
    assert re.search(link, login(people["alice"]).get(f"/runs/{run.pk}/").content.decode())
    # erin audits every run but reads no collection: the footnote stays, without a link.
    audit = login(people["erin"]).get(f"/runs/{run.pk}/").content.decode()
    assert 'id="fn:1"' in audit and "manual.md" in audit and "?chunk=" not in audit
    # Another folder of its collection gets a manual.md, and the file is "docs/manual.md" from then on: the
    # footnote, which names "manual.md", still leads to its chunk.
    Source.objects.filter(pk=chunk.source_id).update(name="docs/manual.md")
    assert re.search(link, login(people["alice"]).get(f"/runs/{run.pk}/").content.decode())


def test_links_written_into_a_document_do_not_survive(people: dict) -> None:  # noqa: F811
    from tests.specs.test_generate_web import make_run

    run = make_run(
        people["alice"],
        text="# Doc\n\nSee [here](/sources/1/?chunk=1#chunk-1) [^1].\n\n"
        "[^1]: [evil](https://example.com/x), lines 1-2\n",
    )
    page = login(people["alice"]).get(f"/runs/{run.pk}/").content.decode()
    assert "example.com" not in page and "?chunk=" not in page
