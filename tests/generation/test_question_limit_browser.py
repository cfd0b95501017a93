"""The question box in a real browser (chromium): it shows its limit and counts down; a longer paste is kept
whole and refused before it is sent, not cut silently. The counter is a nonce'd script under the page's CSP."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from generation.answers import MAX_QUESTION_CHARS
from generation.models import QueryLog
from tests.generation.test_web_browser import sign_in

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_the_question_box_counts_down_to_its_limit(
    browser_page: Any, live_server: Any, make_user: Callable[..., Any]
) -> None:
    from playwright.sync_api import expect

    make_user("alice")
    page = browser_page
    refused: list[str] = []
    page.on("console", lambda msg: refused.append(msg.text) if "Content Security Policy" in msg.text else None)
    errors = sign_in(page, live_server.url)
    expect(page).to_have_url(f"{live_server.url}/ask/")
    response = page.request.get(f"{live_server.url}/ask/")
    script_src = next(d for d in response.headers["content-security-policy"].split(";") if "script-src" in d)
    assert "'nonce-" in script_src and "unsafe-inline" not in script_src and "unsafe-eval" not in script_src
    assert page.locator("script:not([nonce])").count() == 0

    count = page.locator("#question-count")
    expect(count).to_have_text("4,000 of 4,000 characters left")
    page.fill("#id_question", "x" * (MAX_QUESTION_CHARS - 10))
    expect(count).to_have_text("10 of 4,000 characters left")
    pasted = "What is the default IP address? " * 625  # 20,000 characters
    page.fill("#id_question", pasted)
    assert page.eval_on_selector("#id_question", "box => box.value.length") == len(pasted)  # not cut
    expect(count).to_have_text("16,000 characters over the limit of 4,000: shorten the question")
    page.click("#ask-form button[type=submit]")
    assert page.eval_on_selector("#id_question", "box => box.validity.valid") is False
    expect(page).to_have_url(f"{live_server.url}/ask/")
    assert QueryLog.objects.count() == 0 and errors == [] and refused == []
