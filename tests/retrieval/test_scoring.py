from __future__ import annotations

from retrieval.services.scoring import parse_scores, relevance_score
from tests.conftest import ScriptedLLM


def test_parse_scores_is_defensive() -> None:
    text = "S1: 7\n[S2] = 3.5\nS3 - 11\nS9: 5\nS2: 9\ngarbage\nS4:10"
    assert parse_scores(text, 4) == {1: 7.0, 2: 3.5, 4: 10.0}


def test_unscored_chunks_are_flagged_not_dropped(scripted_llm: ScriptedLLM, settings) -> None:
    scripted_llm.reply = lambda m: "S1: 8\nI cannot rate the others."
    out = relevance_score(question="q", passages=["a", "b", "c"], model="scripted/scorer")
    assert out[0].score == 8 and out[0].flag == ""
    assert out[1].score is None and out[1].flag == "unscored"
    assert len(scripted_llm.calls) == 1


def test_scoring_is_batched(scripted_llm: ScriptedLLM) -> None:
    scripted_llm.reply = lambda m: "\n".join(f"S{i}: 5" for i in range(1, 6))
    out = relevance_score(question="q", passages=[str(i) for i in range(12)], model="scripted/scorer")
    assert len(out) == 12 and len(scripted_llm.calls) == 3
