from __future__ import annotations

from retrieval.services.gate import gate_decide


def test_gate_refuses_when_best_score_too_low() -> None:
    decision = gate_decide([0.19, 0.1], min_score=0.2, min_chunks=1)
    assert not decision.passed and "best similarity 0.19" in decision.reason


def test_gate_refuses_when_too_few_chunks_pass() -> None:
    decision = gate_decide([0.5, 0.19], min_score=0.2, min_chunks=2)
    assert not decision.passed and decision.passing == 1


def test_gate_passes_at_threshold() -> None:
    decision = gate_decide([0.2, 0.2, 0.0], min_score=0.2, min_chunks=2)
    assert decision.passed and decision.passing == 2


def test_gate_with_no_candidates() -> None:
    assert not gate_decide([], min_score=0.2, min_chunks=1).passed
