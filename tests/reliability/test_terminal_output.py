"""Document text on the terminal: a hostile document must not drive the user's terminal.

A document (and its file name, title and headings) carries ESC sequences that would
clear the screen (``ESC [2J``), retitle the window (``ESC ]0;…BEL``), recolour, move
the cursor home, plus C1 CSI, backspace, carriage return and DEL. It goes through a
real ``foundry ingest``, then every command that prints document-derived text:
``query`` (answer, sources, snippets, conflicts; text and ``--json``), ``status`` and
``generate --dry-run`` (retrieval list and the prompt). What is printed must hold no
control character but newline and tab, and must still show the text, escaped; the
JSON must parse back to the stored text unchanged.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from sources.models import Chunk, Source
from sources.services.ingest_jobs import knowledge_base_ingest
from tests.conftest import ScriptedLLM
from tests.generation.conftest import echo_reply
from tests.reliability.test_hostile_text import SPEC, approve

pytestmark = pytest.mark.django_db

CLEAR, TITLE, RED, HOME = "\x1b[2J", "\x1b]0;pwned\x07", "\x1b[31m", "\x1b[H"
NAME = f"pump{TITLE}.md"
DOCUMENT = (
    f"# Pump {RED}P1\n\n"
    f"## Flow{CLEAR}\n\n"
    f"The pump P1 delivers 40 litres per minute{CLEAR}{TITLE} at 3 bar. "
    f"Its motor\x9b2J is rated\x08\x08 at 5\x7f kW{HOME}.\n"
    f"The P1 supply voltage is VCC = 24 V.\n"
)
DATASHEET = "# P1 datasheet\n\n## Supply\n\nThe P1 supply voltage is VCC = 48 V.\n"
# Every control character but newline and tab: what a terminal acts on.
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


@pytest.fixture
def hostile(
    kb: Path, make_user: Callable[..., Any], foundry_config: Any, scripted_llm: ScriptedLLM, settings: Any
) -> Path:
    """The hostile document and a datasheet that contradicts it (VCC), indexed; an approved spec."""
    settings.FOUNDRY_QUERY_RATE = 0
    foundry_config(retrieval={"min_chunks": 1})
    (kb / NAME).write_text(DOCUMENT)
    (kb / "datasheet.md").write_text(DATASHEET)
    knowledge_base_ingest(target=kb)
    assert CLEAR in Chunk.objects.get(source__path=NAME, text__contains="40 litres").text  # stored as written
    make_user("alice")
    approve(SPEC)
    scripted_llm.reply = lambda messages: (
        "# Pump\n\n" + echo_reply(messages) if "Write a short guide" in messages[0]["content"] else echo_reply(messages)
    )
    return kb


def cli(*args: str) -> str:
    out = io.StringIO()
    call_command("foundry", *args, stdout=out)
    return out.getvalue()


def assert_terminal_safe(printed: str) -> None:
    assert not CONTROL.findall(printed), sorted(set(CONTROL.findall(printed)))


def test_query_prints_document_text_escaped(hostile: Path) -> None:
    printed = cli("query", "--snippets", "--", "How many litres per minute does the pump P1 deliver?")
    assert_terminal_safe(printed)
    answer = printed.split("Answer:", 1)[1].split("Sources:", 1)[0]
    assert "40 litres per minute\\x1b[2J\\x1b]0;pwned\\x07 at 3 bar" in answer  # the answer: shown, escaped
    sources = printed.split("Sources:", 1)[1]
    assert "pump\\x1b]0;pwned\\x07.md" in sources  # file name
    assert "Flow\\x1b[2J" in sources  # heading
    assert "> The pump P1 delivers 40 litres per minute\\x1b[2J" in sources  # snippet
    assert "motor\\x9b2J is rated\\x08\\x08 at 5\\x7f kW\\x1b[H" in sources


def test_query_conflict_block_is_escaped(hostile: Path) -> None:
    printed = cli("query", "--", "What is the P1 supply voltage VCC?")
    assert_terminal_safe(printed)
    assert "Conflict detected" in printed
    assert "(pump\\x1b]0;pwned\\x07.md § Pump \\x1b[31mP1 > Flow\\x1b[2J, lines" in printed  # name and heading


def test_query_json_is_terminal_safe_and_parses_back_to_the_stored_text(hostile: Path) -> None:
    printed = cli("query", "--json", "--snippets", "--", "How many litres per minute does the pump P1 deliver?")
    assert_terminal_safe(printed)
    body = json.loads(printed)
    assert CLEAR in body["answer"] and TITLE in body["answer"]  # JSON escapes change nothing once parsed
    texts = {c["text"] for c in body["citations"] if c["source"] == NAME}
    assert texts and texts <= set(Chunk.objects.filter(source__path=NAME).values_list("text", flat=True))
    assert any("\x9b2J" in text for text in texts)


def test_status_and_ingest_print_titles_and_names_escaped(hostile: Path) -> None:
    assert Source.objects.get(path=NAME).title == f"Pump {RED}P1"
    printed = cli("status")
    assert_terminal_safe(printed)
    assert "pump\\x1b]0;pwned\\x07.md" in printed and "Pump \\x1b[31mP1" in printed
    printed = cli("ingest", str(hostile))
    assert_terminal_safe(printed)
    assert "pump\\x1b]0;pwned\\x07.md" in printed
    assert_terminal_safe(cli("ingest", str(hostile), "--json"))


def test_generate_dry_run_prints_retrieval_and_prompt_escaped(hostile: Path, tmp_path: Path) -> None:
    printed = cli("generate", "--topic", "pump P1 flow and supply", "--output", str(tmp_path / "out.md"), "--dry-run")
    assert_terminal_safe(printed)
    assert "pump\\x1b]0;pwned\\x07.md, " in printed  # the retrieval list
    assert "40 litres per minute\\x1b[2J\\x1b]0;pwned\\x07 at 3 bar" in printed  # the prompt's passages


def test_generate_prints_conflicts_escaped(hostile: Path, tmp_path: Path) -> None:
    printed = cli("generate", "--topic", "P1 supply voltage VCC", "--output", str(tmp_path / "out.md"), "--yes")
    assert_terminal_safe(printed)
    assert "Conflict detected" in printed
    assert "(pump\\x1b]0;pwned\\x07.md § Pump \\x1b[31mP1 > Flow\\x1b[2J, lines" in printed
    printed = cli(
        "generate", "--topic", "P1 supply voltage VCC", "--output", str(tmp_path / "out.md"), "--yes", "--json"
    )
    assert_terminal_safe(printed)
    assert any(NAME in (c["a"]["source"], c["b"]["source"]) for c in json.loads(printed)["conflicts"])
