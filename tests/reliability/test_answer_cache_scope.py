"""The answer cache under concurrent ingest: an ingest into another collection keeps cached answers,
one into the question's own scope invalidates them (found by the load test: every ingest emptied the cache)."""

from __future__ import annotations

from pathlib import Path
from collections.abc import Callable
from typing import Any

import pytest

from generation.answers import answer_question
from sources.models import Collection
from sources.services.collections import collection_create
from sources.services.ingest_jobs import knowledge_base_ingest
from tests.conftest import ScriptedLLM

pytestmark = pytest.mark.django_db

QUESTION = "How many sensors can the RS-485 bus take?"


def ingest(kb: Path, collection: str, name: str, text: str) -> None:
    folder = kb / collection
    folder.mkdir(exist_ok=True)
    (folder / name).write_text(text)
    knowledge_base_ingest(target=folder, collection=collection)


def test_an_ingest_elsewhere_keeps_the_cache_and_one_in_scope_clears_it(
    kb: Path, scripted_llm: ScriptedLLM, foundry_config: Callable[..., Any]
) -> None:
    foundry_config(retrieval={"min_chunks": 1})
    scripted_llm.reply = lambda m: "Up to 8 sensors can be connected to the RS-485 bus [S1]."
    for name in ("alpha", "beta"):
        collection_create(name=name)
    ingest(kb, "alpha", "bus.md", "# Bus\n\nUp to 8 sensors can be connected to the RS-485 bus.\n")
    scope = [Collection.objects.get(name="alpha").pk]

    def ask() -> Any:
        return answer_question(question=QUESTION, collection_ids=scope)

    assert not ask().cached and ask().cached
    ingest(kb, "beta", "other.md", "# Other\n\nThe beta gateway has 4 relays.\n")
    assert ask().cached  # beta is outside the scope: same sources, same answer
    ingest(kb, "alpha", "more.md", "# More\n\nThe RS-485 bus needs 120 Ohm termination.\n")
    assert not ask().cached  # a new source in scope may change the answer
    assert len(scripted_llm.calls) == 2
