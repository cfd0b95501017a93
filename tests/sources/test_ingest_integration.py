"""Ingest with the real embedding model and the real local LLM (context prefixes and summaries on)."""

from __future__ import annotations

from pathlib import Path

import pytest

from core import llm
from core.grounding import Grounder
from retrieval.models import ChunkSearch
from sources.models import Chunk, SourceSummary
from sources.services.ingest_jobs import knowledge_base_ingest

pytestmark = [pytest.mark.integration, pytest.mark.django_db]


def test_real_models_ingest_and_both_channels_find_the_chunk(kb: Path, foundry_config) -> None:
    foundry_config(
        embedding={"context_model": "local/smollm2-135m"},
        ingest={"summary_model": "local/smollm2-135m", "summary_max_tokens": 60},
    )
    (kb / "pump.md").write_text(
        "# Pump P-100 manual\n\n## Maintenance\n\nReplace the shaft seal of the P-100 every 4000 operating hours.\n\n"
        "## Wiring\n\nConnect the motor to a 400 V three-phase supply.\n"
    )
    with llm.record_calls() as calls:
        report = knowledge_base_ingest(target=kb)
    assert report.count("ingested") == 1
    assert {purpose for purpose, _ in calls.completions} == {"context_prefix", "summary"}
    seal = Chunk.objects.get(text__contains="shaft seal")
    assert seal.context.startswith("Pump P-100 manual > Maintenance") and len(seal.context) > len(
        "Pump P-100 manual > Maintenance"
    )  # the LLM's prefix follows the heading path
    # SmolLM2 tends to summarise this page with claims it does not make ("designed to ensure maximum
    # efficiency and safety", "troubleshooting tools"): what is stored, if anything, is what the chunks support
    chunks = {f"S{i}": text for i, text in enumerate(Chunk.objects.order_by("ordinal").values_list("text", flat=True))}
    for summary in SourceSummary.objects.values_list("text", flat=True):
        grounded = Grounder(chunks).ground(summary)
        assert grounded.total and grounded.supported == grounded.total, grounded.audit(summary)
    bm25 = ChunkSearch.search.keyword("shaft seal replacement interval", limit=3)
    vector = llm.embed(["How often must the seal on the pump shaft be changed?"], model="local/all-minilm-l6-v2")[0]
    dense = ChunkSearch.search.nearest(vector, model="local/all-minilm-l6-v2", k=3)
    assert bm25[0].chunk_id == seal.pk
    assert dense[0].chunk_id == seal.pk
