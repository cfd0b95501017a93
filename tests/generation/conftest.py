"""Fixtures for generation tests: a small indexed corpus with a deliberate VCC conflict."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from sources.services.ingest_jobs import knowledge_base_ingest

MANUAL = """# AX-200 Manual

## Power supply

The gateway accepts a main input of 12 to 24 V DC through terminal X1.
The internal logic supply is VCC = 3.3 V.

## Sensor bus

Up to 8 sensors can be connected to the RS-485 bus.
The bus must be terminated with 120 Ohm at both ends.
"""
DATASHEET = "# AX-200 Datasheet\n\n## Power\n\nThe internal logic supply is VCC = 5 V.\n"


@pytest.fixture
def indexed(kb: Path, foundry_config) -> Path:
    # A three-chunk corpus has one relevant chunk per question; the seed's min_chunks=2 would refuse all.
    foundry_config(retrieval={"min_chunks": 1})
    (kb / "manual.md").write_text(MANUAL)
    (kb / "datasheet.md").write_text(DATASHEET)
    knowledge_base_ingest(target=kb)
    return kb


BETA_NOTES = "# Beta bus notes\n\n## Sensor bus\n\nThe beta RS-485 sensor bus connects up to 32 sensors at 9600 baud.\n"


def echo_reply(messages: list[dict]) -> str:
    """A scripted answer that copies the first sentence of every passage, cited: always grounded."""
    system = messages[0]["content"]
    context = system.rsplit("</context>", 1)[0].rsplit("<context>\n", 1)[1]
    sentences = []
    for block in context.strip().split("\n\n"):
        head, _, text = block.partition("\n")
        if not head.startswith("[S"):
            continue
        label = head[1:].split("]", 1)[0]
        lines = [line for line in text.splitlines() if line.strip() and not line.startswith("#")]
        if lines:
            sentences.append(f"{lines[0].split('. ')[0].rstrip('.')}. [{label}]")
    return " ".join(sentences) or "The indexed documentation does not contain this information."


@pytest.fixture
def scoped(kb: Path, world_users: dict, foundry_config, scripted_llm) -> dict:
    """Collections alpha (alice, carol) and beta (bob), each with an indexed document about the sensor bus.

    The scripted generator echoes a cited sentence from every passage it is given.
    """
    from sources.services.collections import collection_create, collection_grant

    foundry_config(retrieval={"min_chunks": 1})
    collection_create(name="alpha")
    collection_create(name="beta")
    collection_grant(collection="alpha", username="alice")
    collection_grant(collection="alpha", username="carol")
    collection_grant(collection="beta", username="bob")
    for name, folder, text in (("alpha", "alpha", MANUAL), ("beta", "beta", BETA_NOTES)):
        root = kb / folder
        root.mkdir()
        (root / f"{folder}-notes.md").write_text(text)
        knowledge_base_ingest(target=root, collection=name)
    scripted_llm.reply = echo_reply
    return world_users


@pytest.fixture
def world_users(make_user) -> dict:
    return {
        "alice": make_user("alice"),
        "bob": make_user("bob"),
        "carol": make_user("carol", staff=True),
        "root": make_user("root", superuser=True),
        "dave": make_user("dave"),
    }


def follows_seen(monkeypatch: pytest.MonkeyPatch, module: ModuleType) -> list[tuple[str, ...]]:
    """The ``Asked.quoted`` of every question ``module`` answers through its ``answer_logged``, in order."""
    seen: list[tuple[str, ...]] = []
    answer_logged = module.answer_logged

    def spy(question: str, *, asked: Any, **kwargs: Any) -> Any:
        seen.append(asked.quoted)
        return answer_logged(question, asked=asked, **kwargs)

    monkeypatch.setattr(module, "answer_logged", spy)
    return seen
