"""At 390 px (a phone) every page is usable: no sideways scrolling, a compact navigation, text that wraps."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User

from generation.models import QueryLog
from generation.conversations import conversation_start
from tests.conftest import PASSWORD, World, record_query
from tests.specs.test_generate_web import make_run

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 860}
LONG = "RS485_TERMINATION_RESISTOR_" * 12  # one unbroken word, far wider than a phone
# The widest the document gets, and how many rows the header's links take.
LAYOUT = """() => {
  const links = [...document.querySelectorAll("header nav a, header nav span, header .user")];
  const rows = new Set(links.map(el => Math.round(el.getBoundingClientRect().top)));
  return {scroll: document.documentElement.scrollWidth, inner: window.innerWidth, navRows: rows.size};
}"""


# Each table wider than its box: whether it scrolls inside itself (its own scroll width beyond its box).
TABLES = """() => [...document.querySelectorAll("main table")].map(t => ({
  wide: t.scrollWidth > t.clientWidth ? t.scrollWidth : 0,
  scrolls: getComputedStyle(t).overflowX === "auto" || getComputedStyle(t.parentElement).overflowX === "auto",
}))"""


def phone_pages(world: World) -> list[str]:
    alice = world.users["alice"]
    row = record_query(
        alice,
        question=f"Where is {LONG}?",
        answer=f"It is {LONG} [S1].",
        citations=[
            {
                "id": "S1",
                "chunk_id": world.chunks["alpha"][0].pk,
                "source": "alpha.md/" + LONG,
                "title": LONG,
                "heading": LONG,
                "page": 1,
                "lines": [1, 1],
                "score": 0.8,
            }
        ],
        channels={"bm25": [[1, 0.5]]},
        timings={"total": 1200.0, "retrieve": 300.0},
    )
    run = make_run(
        alice, topic=f"Wiring {LONG}", text=f"# Guide\n\n{LONG} is long.\n\n| a | b |\n|---|---|\n| {LONG} | x |\n"
    )
    conversation = conversation_start(owner=alice, question=f"Where is {LONG}?")
    record_query(
        alice,
        question=f"And {LONG}? ({LONG})",
        message=f"And {LONG}?",
        conversation=conversation,
        answer=f"It is {LONG} [S1].",
        citations=row.citations,
        channels={"bm25": [[1, 0.5]]},
    )
    # An answer quoting a wide table (a datasheet's): its cells are short words, so it cannot wrap to fit.
    table = (
        "| "
        + " | ".join(f"Column {i}" for i in range(12))
        + " |\n|"
        + "---|" * 12
        + "\n| "
        + " | ".join(f"{i}.5 V" for i in range(12))
        + " |\n"
    )
    tabled = conversation_start(owner=alice, question="Which supply voltages?")
    record_query(
        alice,
        question="Which supply voltages?",
        conversation=tabled,
        answer=f"{table}\n[S1]",
        citations=row.citations,
        channels={"bm25": [[1, 0.5]]},
    )
    source = world.sources["alpha"]
    return [
        f"/conversations/{tabled.pk}/",
        "/ask/",
        f"/ask/{row.pk}/",
        "/conversations/",
        f"/conversations/{conversation.pk}/",
        "/sources/",
        f"/sources/{source.pk}/",
        "/query-log/",
        f"/query-log/{row.pk}/",
        "/dashboard/",
        "/runs/",
        f"/runs/{run.pk}/",
        "/generate/",
        "/no-such-page/",
    ]


@pytest.mark.parametrize("viewport", [PHONE, DESKTOP], ids=["phone", "desktop"])
def test_every_page_fits_a_phone(browser_page: Any, live_server: Any, world: World, viewport: dict) -> None:
    # A long unbroken file name and question, as real uploads have.
    from sources.models import Source

    Source.objects.filter(pk=world.sources["alpha"].pk).update(path="alpha-" + LONG + ".md", title=LONG)
    User.objects.filter(pk=world.users["alice"].pk).update(is_staff=True)
    urls = phone_pages(world)
    page = browser_page
    page.set_viewport_size(viewport)
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("#id_username", "alice")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url("**/ask/")
    shots = os.environ.get("FOUNDRY_SCREENSHOTS")
    problems = []
    for url in urls:
        page.goto(live_server.url + url)
        page.wait_for_load_state("load")
        layout = page.evaluate(LAYOUT)
        if shots:
            page.screenshot(
                path=str(Path(shots) / ((url.strip("/").replace("/", "_") or "home") + ".png")), full_page=True
            )
        if layout["scroll"] > layout["inner"]:
            problems.append(f"{url}: page is {layout['scroll']} px wide in a {layout['inner']} px window")
        for box in page.evaluate(TABLES):
            if box["wide"] and not box["scrolls"]:
                problems.append(f"{url}: a table {box['wide']} px wide does not scroll inside its box")
        if layout["navRows"] > 2:
            problems.append(f"{url}: the navigation takes {layout['navRows']} rows")
    assert QueryLog.objects.count() == 3
    assert not problems, "\n".join(problems)
