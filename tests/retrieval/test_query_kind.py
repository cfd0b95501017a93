"""Retrieval embeds the question as a query (e5 reads it with ``query: ``), ingest its chunks as passages."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from core import llm
from retrieval.services import retrieve as retrieve_module
from retrieval.services.retrieve import retrieve
from sources.services.ingest_jobs import knowledge_base_ingest


@pytest.mark.django_db
def test_the_question_is_embedded_as_a_query(kb: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (kb / "pump.md").write_text("# Pump\n\nThe pump runs at up to 70 °C.\n")
    knowledge_base_ingest(target=kb)
    kinds: list[tuple[list[str], str]] = []
    real = llm.embed

    def spy(texts: list[str], **kwargs: Any) -> list[list[float]]:
        kinds.append((list(texts), kwargs.get("kind", "passage")))
        return real(texts, **kwargs)

    monkeypatch.setattr(retrieve_module.llm, "embed", spy)
    retrieve(question="How hot may the pump run?", collection_ids=None, mode="dense")
    assert (["How hot may the pump run?"], "query") in kinds
