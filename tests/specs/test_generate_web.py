"""The generate page, run pages, downloads, and the generation API: scope, path safety, escaping."""

from __future__ import annotations

import re

import json
import os
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import Permission, User
from django.test import Client

from foundry_site.services.tokens import token_create
from generation.models import GenerationRun
from sources.models import Chunk, Collection
from sources.services.collections import collection_grant
from sources.services.ingest_jobs import knowledge_base_ingest
from specs import services
from tests.conftest import ScriptedLLM
from tests.generation.conftest import DATASHEET, MANUAL
from tests.conftest import login

pytestmark = pytest.mark.django_db

REPLY = "# Sensor bus\n\nUp to 8 sensors can be connected to the RS-485 bus [S1].\n"
TOPIC = "sensors on the RS-485 bus"


def approve(name: str) -> None:
    author = User.objects.get_or_create(username="author")[0]
    reviewer = User.objects.get_or_create(username="rita")[0]
    reviewer.user_permissions.add(Permission.objects.get(codename="approve_featurespec"))
    reviewer = User.objects.get(pk=reviewer.pk)
    services.spec_create(name=name, title=f"{name} title", body=f"# {name}\n\nWrite a short guide.\n", by=author)
    services.spec_submit(name=name, by=author)
    services.spec_approve(name=name, by=reviewer)


@pytest.fixture
def people(make_user: Any) -> dict[str, Any]:
    """carol is staff (a spec reviewer, say) without the audit permission; erin has it and is not staff."""
    erin = make_user("erin")
    erin.user_permissions.add(Permission.objects.get(codename="view_generationrun"))
    return {
        "alice": make_user("alice"),
        "bob": make_user("bob"),
        "carol": make_user("carol", staff=True),
        "dave": make_user("dave"),
        "erin": erin,
    }


@pytest.fixture
def ready(kb: Path, foundry_config: Any, people: dict, scripted_llm: ScriptedLLM) -> ScriptedLLM:
    foundry_config(retrieval={"min_chunks": 1})
    (kb / "manual.md").write_text(MANUAL)
    (kb / "datasheet.md").write_text(DATASHEET)
    knowledge_base_ingest(target=kb, collection="manuals")
    for name in ("alice", "bob"):
        collection_grant(collection="manuals", username=name)
    approve("wiring-guide")
    scripted_llm.reply = lambda m: REPLY
    return scripted_llm


def generate(client: Client, capture: Any, topic: str = TOPIC, feature: str = "wiring-guide") -> Any:
    with capture(execute=True):
        return client.post("/generate/", {"topic": topic, "feature": feature})


def test_generate_form_lists_approved_specs_and_runs_one(
    ready: ScriptedLLM, people: dict, django_capture_on_commit_callbacks: Any
) -> None:
    client = login(people["alice"])
    form = client.get("/generate/").content.decode()
    assert '<option value="wiring-guide">wiring-guide v1: wiring-guide title</option>' in form
    response = generate(client, django_capture_on_commit_callbacks)
    run = GenerationRun.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/runs/{run.pk}/"
    assert run.created_by == people["alice"] and run.status == "succeeded"
    assert run.collection_ids == [Collection.objects.get(name="manuals").pk]
    assert run.output_path == str(settings.FOUNDRY_HOME / "outputs" / f"run-{run.pk}.md")
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert '<article class="document" id="document">' in page and "<h1>Sensor bus</h1>" in page
    assert 'href="#fn:1"' in page and "manual.md" in page and "Download .md" in page
    chunk = Chunk.objects.get(source__name="manual.md", text__contains="Up to 8 sensors")
    found = re.search(
        rf'<a href="(/sources/{chunk.source_id}/\?chunk={chunk.pk}&amp;lines=\d+-\d+)#chunk-{chunk.pk}">', page
    )
    assert found and "manual.md" in page[found.end() : found.end() + 20]  # the footnote: the viewer at its lines
    viewer = found[1].replace("&amp;", "&")
    download = client.get(f"/runs/{run.pk}/download")
    assert download["Content-Disposition"] == 'attachment; filename="wiring-guide-sensors-on-the-rs-485-bus.md"'
    assert b"".join(download.streaming_content).decode() == Path(run.output_path).read_text()
    assert client.get(f"/runs/{run.pk}/status").json() == {
        "id": run.pk,
        "status": "succeeded",
        "label": "Succeeded",
        "stage": "done",
        "done": True,
    }
    assert client.get(viewer).status_code == 200
    assert f"/runs/{run.pk}/" in client.get("/runs/").content.decode()


def test_grounding_verdicts_are_shown_to_staff_and_auditors_only(
    ready: ScriptedLLM, people: dict, django_capture_on_commit_callbacks: Any
) -> None:
    ready.reply = lambda m: REPLY + "\nThe bus carries <script>alert(1)</script> 400 V [S1].\n"
    generate(login(people["alice"]), django_capture_on_commit_callbacks)
    run = GenerationRun.objects.get()
    assert run.status == "needs_review" and run.sentences_kept == 1 and run.sentences_total == 2
    people["carol"].user_permissions.add(Permission.objects.get(codename="view_generationrun"))
    for who in ("carol", "erin"):  # a staff auditor, and an auditor who is not staff
        page = login(people[who]).get(f"/runs/{run.pk}/").content.decode()
        assert "Grounding check" in page and "left out" in page and "kept, supported by S1" in page, who
        assert "<script>alert(1)" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    author = login(people["alice"]).get(f"/runs/{run.pk}/").content.decode()
    assert "Grounding check" not in author and "400 V" not in author


def test_form_errors(ready: ScriptedLLM, people: dict, django_capture_on_commit_callbacks: Any) -> None:
    client = login(people["alice"])
    assert generate(client, django_capture_on_commit_callbacks, topic="").status_code == 400
    assert generate(client, django_capture_on_commit_callbacks, feature="nope").status_code == 400
    refused = generate(login(people["dave"]), django_capture_on_commit_callbacks)
    assert refused.status_code == 400 and "cannot read any collection" in refused.content.decode()
    assert not GenerationRun.objects.exists()


def test_no_approved_spec_says_so(people: dict) -> None:
    page = login(people["alice"]).get("/generate/").content.decode()
    assert "No feature spec is approved yet" in page


def make_run(
    user: Any, *, text: str = "# Doc\n\nBody.\n", status: str = "succeeded", path: Path | None = None, **fields: Any
) -> GenerationRun:
    run = GenerationRun.objects.create(
        topic=fields.pop("topic", "topic"),
        spec_name="wiring-guide",
        spec_version=1,
        spec_body="x",
        created_by=user,
        status=status,
        stage="done",
        **fields,
    )
    target = path or settings.FOUNDRY_HOME / "outputs" / f"run-{run.pk}.md"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    GenerationRun.objects.filter(pk=run.pk).update(output_path=str(target))
    return GenerationRun.objects.get(pk=run.pk)


@pytest.mark.parametrize("url", ["/runs/{}/", "/runs/{}/status", "/runs/{}/download"])
def test_others_runs_are_404(people: dict, url: str) -> None:
    run = make_run(people["alice"])
    assert login(people["bob"]).get(url.format(run.pk)).status_code == 404
    assert login(people["carol"]).get(url.format(run.pk)).status_code == 404  # staff alone is not enough
    assert login(people["alice"]).get(url.format(run.pk)).status_code == 200
    assert login(people["erin"]).get(url.format(run.pk)).status_code == 200  # the audit permission


def test_run_list_shows_others_runs_to_auditors_only(people: dict) -> None:
    make_run(people["alice"], topic="alice's private topic")
    make_run(people["carol"], topic="carol's own topic")
    staff = login(people["carol"]).get("/runs/")
    assert [r.topic for r in staff.context["page"]] == ["carol's own topic"]
    assert "alice's private topic" not in staff.content.decode() and "Every user" not in staff.content.decode()
    audit = login(people["erin"]).get("/runs/")
    assert [r.topic for r in audit.context["page"]] == ["carol's own topic", "alice's private topic"]
    assert "Every user's runs" in audit.content.decode() and "<th>By</th>" in audit.content.decode()


def test_download_only_serves_files_inside_outputs(people: dict, tmp_path: Path) -> None:
    secret = tmp_path / "secret.md"
    secret.write_text("secret")
    outside = make_run(people["alice"], path=secret)
    client = login(people["alice"])
    assert client.get(f"/runs/{outside.pk}/download").status_code == 404
    assert "secret" not in client.get(f"/runs/{outside.pk}/").content.decode().replace("secret.md", "")
    inside = make_run(people["alice"])
    (settings.FOUNDRY_HOME / "secret_key").write_text("do not serve")
    GenerationRun.objects.filter(pk=inside.pk).update(
        output_path=str(settings.FOUNDRY_HOME / "outputs" / ".." / "secret_key")
    )
    assert client.get(f"/runs/{inside.pk}/download").status_code == 404
    link = settings.FOUNDRY_HOME / "outputs" / "link.md"
    os.symlink(secret, link)
    linked = make_run(people["alice"], path=None)
    GenerationRun.objects.filter(pk=linked.pk).update(output_path=str(link))
    assert client.get(f"/runs/{linked.pk}/download").status_code == 404
    unfinished = make_run(people["alice"], status="running")
    assert client.get(f"/runs/{unfinished.pk}/download").status_code == 404


def test_run_page_renders_documents_inert(people: dict) -> None:
    run = make_run(
        people["alice"],
        topic="<img src=x onerror=alert(1)>",
        text="# Guide <script>alert(1)</script>\n\nText <img src=x onerror=alert(1)> "
        '[link](javascript:alert(1)) <p id="run-status">x</p>\n',
        conflicts=[
            {
                "quantity": "VCC",
                "detector": "rule",
                "a": {"label": "S1", "source": "<script>alert(1)</script>", "where": "", "quote": "q"},
                "b": {"label": "S2", "source": "b.md", "where": "", "quote": "q2"},
            }
        ],
    )
    page = login(people["alice"]).get(f"/runs/{run.pk}/").content.decode()
    assert "<script>alert(1)" not in page and "onerror" not in page.replace("onerror=alert(1)&gt;", "")
    assert "javascript:" not in page and page.count('id="run-status"') == 1
    assert "&lt;img src=x onerror=alert(1)&gt;" in page  # the topic, escaped
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page  # the conflict's source name, escaped
    assert page.index("Conflict between sources: VCC") < page.index('id="document"')


def test_pending_run_page_refreshes_itself(people: dict) -> None:
    run = GenerationRun.objects.create(
        topic="t", spec_name="s", spec_version=1, spec_body="x", created_by=people["alice"]
    )
    page = login(people["alice"]).get(f"/runs/{run.pk}/").content.decode()
    assert '<noscript><meta http-equiv="refresh" content="3"></noscript>' in page
    assert f"/runs/{run.pk}/status" in page and "Download .md" not in page


# --- API --------------------------------------------------------------------------------------


def api(username: str) -> Client:
    token = token_create(username=username, name="test")
    return Client(enforce_csrf_checks=True, HTTP_AUTHORIZATION=f"Bearer {token.plain}")


def api_generate(client: Client, capture: Any, body: dict) -> Any:
    with capture(execute=True):
        return client.post("/api/v1/generate", json.dumps(body), content_type="application/json")


def test_api_generate_poll_download(ready: ScriptedLLM, people: dict, django_capture_on_commit_callbacks: Any) -> None:
    alice = api("alice")
    started = api_generate(alice, django_capture_on_commit_callbacks, {"topic": TOPIC})
    assert started.status_code == 202
    run_id = started.json()["run_id"]
    assert started.json()["url"] == f"/api/v1/runs/{run_id}"
    run = alice.get(f"/api/v1/runs/{run_id}").json()
    assert run["status"] == "succeeded" and run["spec"] == "wiring-guide" and run["coverage"] == 1.0
    assert run["download"] == f"/api/v1/runs/{run_id}/download" and run["sentences_kept"] == 1
    file = alice.get(run["download"])
    assert file.status_code == 200 and b"[^1]" in b"".join(file.streaming_content)
    listing = alice.get("/api/v1/runs").json()
    assert listing["count"] == 1 and listing["items"][0]["id"] == run_id
    assert listing["items"][0]["download"] == run["download"]  # in the list as on its own
    bob = api("bob")
    assert bob.get(f"/api/v1/runs/{run_id}").status_code == 404
    assert bob.get(f"/api/v1/runs/{run_id}/download").status_code == 404
    assert bob.get("/api/v1/runs").json()["count"] == 0
    carol = api("carol")  # staff, without the audit permission
    assert carol.get(f"/api/v1/runs/{run_id}").status_code == 404
    assert carol.get(f"/api/v1/runs/{run_id}/download").status_code == 404
    assert carol.get("/api/v1/runs").json()["count"] == 0
    erin = api("erin")  # the audit permission
    assert erin.get(f"/api/v1/runs/{run_id}").json()["download"] == run["download"]
    assert b"[^1]" in b"".join(erin.get(run["download"]).streaming_content)
    assert [r["id"] for r in erin.get("/api/v1/runs").json()["items"]] == [run_id]


def test_api_generate_errors(ready: ScriptedLLM, people: dict, django_capture_on_commit_callbacks: Any) -> None:
    alice = api("alice")
    assert api_generate(Client(), django_capture_on_commit_callbacks, {"topic": TOPIC}).status_code == 401
    assert api_generate(alice, django_capture_on_commit_callbacks, {}).status_code == 422
    empty = api_generate(alice, django_capture_on_commit_callbacks, {"topic": "  "})
    assert empty.status_code == 400 and empty.json() == {"detail": "the topic is empty"}
    unknown = api_generate(alice, django_capture_on_commit_callbacks, {"topic": TOPIC, "feature": "nope"})
    assert unknown.status_code == 404 and "Known specs: wiring-guide" in unknown.json()["detail"]
    approve("install-guide")
    several = api_generate(alice, django_capture_on_commit_callbacks, {"topic": TOPIC})
    assert several.status_code == 400 and "Several approved feature specs" in several.json()["detail"]
    nobody = api_generate(api("dave"), django_capture_on_commit_callbacks, {"topic": TOPIC, "feature": "install-guide"})
    assert nobody.status_code == 400 and "cannot read any collection" in nobody.json()["detail"]
    assert not GenerationRun.objects.exists()


def test_api_download_path_safety(people: dict, tmp_path: Path) -> None:
    secret = tmp_path / "elsewhere.md"
    secret.write_text("secret")
    run = make_run(people["alice"], path=secret)
    alice = api("alice")
    assert alice.get(f"/api/v1/runs/{run.pk}").json()["download"] is None
    assert alice.get(f"/api/v1/runs/{run.pk}/download").status_code == 404
    assert Client().get(f"/api/v1/runs/{run.pk}/download").status_code == 401


def test_an_extractive_document_audit_lists_each_sections_quotes() -> None:
    from django.template.loader import render_to_string

    quote = {
        "label": "S2",
        "text": "Use a shielded cable.",
        "lines": [4, 4],
        "score": 0.9,
        "cosine": 0.6,
        "lexical": 0.6,
    }
    sections = [{"heading": "Cable", "best": 0.9, "quoted": [quote]}, {"heading": "Relay", "best": 0.3, "quoted": []}]
    html = render_to_string("_grounding.html", {"grounding": {"writer": "extractive", "sections": sections}})
    assert "Extractive reading" in html and "Model output" not in html
    assert "<h3>Cable" in html and "<td>Use a shielded cable.</td><td>S2</td><td>4</td>" in html
    assert "<h3>Relay" in html and "Nothing close enough to quote." in html
