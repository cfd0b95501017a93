"""The README's browser quick start, as written, on a fresh ``FOUNDRY_HOME``.

Its commands come from the README (init with ``--team``, ingest, the example spec, ``foundry serve``
as a real gunicorn server on a free port, no broker); the numbered steps after them are followed in
Chromium with the user name, question, topic and file name the README gives. A change to that
section of the README breaks this test until the two agree again.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import chromium_or_skip, chromium_page
from tests.generation.test_web_browser import shot
from tests.reliability.test_load import free_port, wait_until_up

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
SECTION = "## Quick start in the browser"
USER, USER_PASSWORD = "newcomer", "a newcomer's long password"


def quick_start() -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    start = text.index(SECTION)
    end = text.find("\n#", start + len(SECTION))
    return text[start:end]


def commands(section: str) -> list[str]:
    block = re.search(r"```bash\n(.*?)```", section, re.DOTALL)
    assert block, "the browser quick start has no bash block"
    return [line for line in block.group(1).splitlines() if line.strip() and not line.startswith("#")]


def given(pattern: str, section: str) -> str:
    found = re.search(pattern, section, re.DOTALL)
    assert found, f"the browser quick start no longer says {pattern!r}"
    return " ".join(found.group(1).split())


def fresh_env(home: Path) -> dict[str, str]:
    """This machine's environment for a new home: no FOUNDRY_* settings (no broker), the shipped configuration."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("FOUNDRY_", "CELERY_")) and k != "DJANGO_SETTINGS_MODULE"
    }
    env.update(
        FOUNDRY_HOME=str(home),
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        HF_HUB_OFFLINE="1",
        TOKENIZERS_PARALLELISM="false",
        PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    )
    return env


def foundry_argv(words: list[str]) -> list[str]:
    """``.venv/bin/foundry ARGS`` as this interpreter runs it from the checkout (the same command)."""
    assert words[0] == ".venv/bin/foundry", words
    return [sys.executable, str(REPO / "manage.py"), "foundry", *words[1:]]


def test_readme_browser_quick_start(tmp_path: Path) -> None:
    chromium, sync_playwright = chromium_or_skip()
    section = quick_start()
    admin = given(r"sign in as `([^`]+)`", section)
    question = given(r'ask\s+"([^"]+)"', section)
    topic = given(r'topic\s+"([^"]+)"', section)
    spec = given(r"spec\s+\*([^*]+)\*", section)
    filename = given(r"saves it as `([^`]+)`", section)
    home = tmp_path / "foundry-home"
    env = fresh_env(home)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server: subprocess.Popen | None = None
    log = tmp_path / "serve.log"
    try:
        for line in commands(section):
            words = shlex.split(line)
            if words[0] == "export":
                name, _, value = words[1].partition("=")
                env[name] = value
                continue
            if words[1] == "serve":
                words[words.index("--port") + 1] = str(port)
                with log.open("w") as out:  # its own session: the teardown stops gunicorn and nothing else
                    server = subprocess.Popen(
                        foundry_argv(words),
                        env=env,
                        cwd=REPO,
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
                continue
            done = subprocess.run(foundry_argv(words), env=env, cwd=REPO, capture_output=True, text=True, timeout=900)
            assert done.returncode == 0, (line, done.stdout, done.stderr)
        assert server is not None, "the quick start never starts the server"
        wait_until_up(url, server)
        with chromium_page(chromium, sync_playwright, accept_downloads=True) as page:
            browse(
                page,
                url,
                admin=admin,
                password=env["FOUNDRY_ADMIN_PASSWORD"],
                question=question,
                topic=topic,
                spec=spec,
                filename=filename,
                tmp_path=tmp_path,
            )
    finally:
        if server is not None:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(timeout=60)
    problems = [p for p in ("Traceback", "Internal Server Error") if p in log.read_text(errors="replace")]
    assert not problems, log.read_text(errors="replace")[-5000:]


def browse(
    page: Any,
    url: str,
    *,
    admin: str,
    password: str,
    question: str,
    topic: str,
    spec: str,
    filename: str,
    tmp_path: Path,
) -> None:
    from playwright.sync_api import expect

    expect.set_options(timeout=120_000)  # two shared cores; the first question loads the embedder
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))

    # 1. Add a normal user in the admin.
    page.goto(f"{url}/admin/")
    page.fill("#id_username", admin)
    page.fill("#id_password", password)
    page.click("input[type=submit]")
    page.locator("#content-main a[href$='/auth/user/']", has_text="Users").click()
    page.click("#content-main a[href$='/auth/user/add/']")
    page.fill("#id_username", USER)
    page.fill("#id_password1", USER_PASSWORD)
    page.fill("#id_password2", USER_PASSWORD)
    page.click("input[name=_save]")
    expect(page.locator(".messagelist .success")).to_contain_text(USER)
    expect(page.locator("#id_is_staff")).not_to_be_checked()
    shot(page, "readme-1-user-added")
    page.click("#logout-form button")

    # 2. Sign in as that user, ask, follow a citation to the source viewer.
    page.goto(f"{url}/")
    page.fill("#id_username", USER)
    page.fill("#id_password", USER_PASSWORD)
    page.click("button[type=submit]")
    page.fill("#id_question", question)
    page.click("#ask-form button[type=submit]")
    source = page.locator("#answer li.source a").first
    expect(source).to_be_visible()
    shot(page, "readme-2-answer", full=True)
    source.click()
    expect(page).to_have_url(re.compile(r"/sources/\d+/\?chunk=\d+&lines=\d+-\d+#chunk-\d+$"))
    chunk = re.search(r"chunk=(\d+)", page.url).group(1)
    expect(page.locator(f"#chunk-{chunk}.target")).to_be_visible()
    expect(page.locator(f"#chunk-{chunk} .line.cited").first).to_be_visible()  # the quoted lines, marked
    shot(page, "readme-3-source-viewer")

    # 3. Generate from the example spec; the run page follows the stages, then shows the document.
    page.click("nav >> text=Generate")
    page.fill("#id_topic", topic)
    page.select_option("#id_feature", spec)
    page.click("button:has-text('Generate')")
    expect(page).to_have_url(re.compile(r"/runs/\d+/$"))
    stages = watch_stages(page)
    assert stages[0] != "done" and stages[-1] == "done" and len(stages) >= 2, stages
    assert set(stages) <= {"queued", "retrieval", "reading", "done"}, stages
    expect(page.locator("#run-status")).to_have_text(re.compile("Succeeded|Needs review"))
    notes = page.locator("#document .footnote a[href*='/sources/']")
    expect(notes.first).to_be_visible()
    shot(page, "readme-5-document", full=True)
    href = notes.first.get_attribute("href")
    assert re.fullmatch(r"/sources/\d+/\?chunk=\d+(&lines=\d+-\d+)?#chunk-\d+", href), href
    with page.expect_download() as download:
        page.click("#run-download")
    assert download.value.suggested_filename == filename
    saved = tmp_path / filename
    download.value.save_as(saved)
    text = saved.read_text(encoding="utf-8")
    assert re.search(r"\[\^1\]: \S", text) and "[^1]" in text.split("## Sources")[0], text[:2000]
    page.goto(href if href.startswith("http") else f"{url}{href}")
    expect(page.locator("article.chunk.target")).to_be_visible()
    assert errors == []


def watch_stages(page: Any, *, timeout: float = 600.0) -> list[str]:
    """The run page's active stage each time it changes, until the document shows (the page reloads then)."""
    from playwright.sync_api import Error as PlaywrightError

    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            stage = page.locator("#run-stages li.active").first.get_attribute("data-stage", timeout=5_000)
            finished = page.locator("#document").count() > 0
        except PlaywrightError:  # the page is reloading
            continue
        if stage and (not seen or seen[-1] != stage):
            seen.append(stage)
            shot(page, f"readme-4-stage-{len(seen)}-{stage}")
        if finished:
            return seen
        page.wait_for_timeout(150)
    raise AssertionError(f"the run did not finish within {timeout:.0f} s; stages seen: {seen}")
