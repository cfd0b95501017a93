"""The sources pages in a real browser: log in, upload, see it ingested, open a chunk, log out."""

from __future__ import annotations

from pathlib import Path
from collections.abc import Callable
from typing import Any

import pytest
from django.conf import settings

from sources.models import Chunk, Source
from sources.services.collections import collection_create, collection_grant
from tests.conftest import PASSWORD

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def manual(sections: int = 14) -> str:
    parts = ["# Gateway manual"]
    for n in range(1, sections + 1):
        sentence = f"Section {n} explains setting number {n} of the gateway and why it matters in the field. "
        parts.append(f"## Setting {n}\n\n" + sentence * 12)
    return "\n\n".join(parts) + "\n"


def shot(page: Any, name: str) -> Path:
    folder = Path(settings.FOUNDRY_HOME) / "screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    page.screenshot(path=str(path), full_page=False)
    return path


def test_login_upload_view_chunk_logout(
    browser_page: Any,
    live_server: Any,
    make_user: Callable[..., Any],
    foundry_config: Callable[..., Any],
    tmp_path: Path,
) -> None:
    from playwright.sync_api import expect

    # This test is about the pages; ingest with the real local LLM has its own tests.
    foundry_config(ingest={"summary_model": "none"}, embedding={"context_model": "none"})
    make_user("alice")
    collection_create(name="manuals")
    collection_grant(collection="manuals", username="alice")
    document = tmp_path / "gateway-manual.md"
    document.write_text(manual())
    page = browser_page

    page.goto(f"{live_server.url}/sources/")
    expect(page).to_have_url(f"{live_server.url}/accounts/login/?next=/sources/")
    shot(page, "1-login")
    page.fill("#id_username", "alice")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    expect(page.locator("h1")).to_have_text("Sources")

    page.set_input_files("#id_file", str(document))
    page.select_option("#id_collection", "manuals")
    page.click("text=Upload and ingest")
    expect(page.locator(".messages li.success")).to_contain_text("Uploaded gateway-manual.md: ingested")
    source = Source.objects.get(path="gateway-manual.md")
    row = page.locator(f"#source-{source.pk}")
    expect(row).to_contain_text("Ingested")
    expect(row).to_contain_text(str(source.chunk_count))
    assert source.chunk_count >= 6
    shot(page, "2-sources")

    target = Chunk.objects.filter(source=source).order_by("-ordinal")[1]
    page.goto(f"{live_server.url}/sources/{source.pk}/?chunk={target.pk}#chunk-{target.pk}")
    highlighted = page.locator(f"#chunk-{target.pk}")
    expect(highlighted).to_have_class("chunk target")
    expect(highlighted).to_be_in_viewport()
    expect(page.locator(f"#chunk-{Chunk.objects.get(source=source, ordinal=0).pk}")).not_to_be_in_viewport()
    expect(highlighted).to_contain_text(target.heading.split(" > ")[-1])
    expect(highlighted).to_contain_text(target.place)
    shot(page, "3-viewer")

    with page.expect_download() as download:
        page.click("text=Download original")
    assert download.value.suggested_filename == "gateway-manual.md"

    page.click("text=Log out")
    expect(page).to_have_url(f"{live_server.url}/accounts/login/")
    page.goto(f"{live_server.url}/sources/{source.pk}/")
    expect(page.locator("h1")).to_have_text("Log in")
