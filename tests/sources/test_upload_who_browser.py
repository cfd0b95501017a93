"""The quick start's second user, in a real browser: on the collection ``foundry init --team`` opened they read
everything but may not upload, and the sources page says whom to ask and the command that grants it; once
granted, their upload is ingested."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from foundry_site.services.setup import team_collection_open
from sources.services.collections import collection_grant
from tests.conftest import PASSWORD

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_the_second_user_is_told_how_to_get_upload_rights(
    browser_page: Any,
    live_server: Any,
    make_user: Callable[..., Any],
    foundry_config: Callable[..., Any],
    tmp_path: Path,
) -> None:
    from playwright.sync_api import expect

    foundry_config(ingest={"summary_model": "none"}, embedding={"context_model": "none"})
    make_user("admin", superuser=True)  # foundry init --admin admin --team
    collection, _ = team_collection_open()
    make_user("bob")  # the team's second account
    page = browser_page
    page.goto(f"{live_server.url}/sources/")
    page.fill("#id_username", "bob")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    who = page.locator("#upload-who")
    expect(who).to_contain_text(f"a public collection such as {collection.name} is read by everyone")
    expect(who).to_contain_text("To upload, ask admin to make you a named reader of the collection")
    expect(who.locator("code")).to_have_text(f"foundry collections grant {collection.name} bob")
    assert page.locator("#id_file").count() == 0

    collection_grant(collection=collection.name, username="bob")  # what the page told the admin to run
    page.reload()
    document = tmp_path / "pump-notes.md"
    document.write_text("# Pump notes\n\nThe pump stops on a dry run.\n")
    page.set_input_files("#id_file", str(document))
    page.select_option("#id_collection", collection.name)
    page.click("text=Upload and ingest")
    expect(page.locator(".messages li.success")).to_contain_text("Uploaded pump-notes.md: ingested")
