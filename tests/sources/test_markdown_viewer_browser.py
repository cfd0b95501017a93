"""A cited Markdown chunk in Chromium: formatted (bold, code, headings), its lines still numbered and marked."""

from __future__ import annotations

from typing import Any

import pytest

from sources.models import Chunk
from tests.conftest import PASSWORD, World

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_the_cited_markdown_lines_are_formatted_and_numbered(browser_page: Any, live_server: Any, world: World) -> None:
    from playwright.sync_api import expect

    source = world.sources["alpha"]
    text = "## Wiring\nUse **shielded** cable.\n- Keep `stubs` short."
    chunk = Chunk.objects.create(source=source, ordinal=2, text=text, line_start=10, line_end=12, token_count=9)
    page = browser_page
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("#id_username", "alice")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.goto(f"{live_server.url}/sources/{source.pk}/?chunk={chunk.pk}&lines=11-12#chunk-{chunk.pk}")
    lines = page.locator(f"#chunk-{chunk.pk} .numbered .line")
    expect(lines).to_have_count(3)
    expect(lines.locator(".n")).to_have_text(["10", "11", "12"])
    cited = page.locator(f"#chunk-{chunk.pk} .line.cited")
    expect(cited).to_have_count(2)
    expect(cited.first.locator("mark strong")).to_have_text("shielded")
    expect(cited.nth(1).locator("mark code")).to_have_text("stubs")
    expect(lines.first.locator("strong.md-h")).to_have_text("Wiring")
    assert "**" not in lines.all_inner_texts()[1] and "##" not in lines.all_inner_texts()[0]
    weight = cited.first.locator("strong").evaluate("e => getComputedStyle(e).fontWeight")
    assert int(weight) >= 600
