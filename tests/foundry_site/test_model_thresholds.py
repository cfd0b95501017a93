"""Thresholds on the embedding model's similarity scale: calibrated per model, as data."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from core import llm, model_thresholds
from core.config import LOCAL_EMBEDDER, FoundryConfig, parse_config

E5 = "local/multilingual-e5-small"


def value(conf: FoundryConfig, key: str) -> float:
    section, name = key.split(".")
    return getattr(getattr(conf, section), name)


def test_minilm_row_is_the_class_defaults() -> None:
    """The defaults in config.py are MiniLM's calibrated values: the two never drift apart."""
    row = model_thresholds.table()[LOCAL_EMBEDDER]
    plain = FoundryConfig()
    assert row == {key: value(plain, key) for key in model_thresholds.KEYS}


def test_every_row_names_a_usable_local_embedding_model_and_its_source() -> None:
    data = json.loads(model_thresholds.DATA.read_text())["models"]
    for model, entry in data.items():
        assert llm.validate_models({model}, role="embedding") == [], model
        assert entry["measured"], f"{model}: say how its thresholds were produced"


def test_a_threshold_left_out_follows_the_embedding_model() -> None:
    e5 = model_thresholds.table()[E5]
    conf = parse_config({"embedding": {"model": E5}})
    assert {key: value(conf, key) for key in model_thresholds.KEYS} == e5
    assert e5["retrieval.min_score"] != FoundryConfig().retrieval.min_score


def test_a_threshold_set_in_foundry_yaml_wins() -> None:
    conf = parse_config({"embedding": {"model": E5}, "retrieval": {"min_score": 0.5}})
    assert conf.retrieval.min_score == 0.5
    assert conf.generation.writer_min_score == model_thresholds.table()[E5]["generation.writer_min_score"]


def test_switching_model_by_override_moves_only_the_thresholds_not_set() -> None:
    base = parse_config({"generation": {"writer_min_score": 0.9}})
    switched = base.with_overrides(embedding={"model": E5})
    e5 = model_thresholds.table()[E5]
    assert switched.retrieval.min_score == e5["retrieval.min_score"]
    assert switched.generation.writer_min_score == 0.9
    back = switched.with_overrides(embedding={"model": LOCAL_EMBEDDER})
    assert back.retrieval.min_score == FoundryConfig().retrieval.min_score


def test_a_model_without_a_row_keeps_the_class_defaults() -> None:
    conf = parse_config({"embedding": {"model": "openai/text-embedding-3-small"}})
    assert conf.retrieval.min_score == FoundryConfig().retrieval.min_score


def write(tmp_path: Path, thresholds: dict, name: str = "thresholds.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps({"models": {"local/x": {"thresholds": thresholds, "measured": {}}}}))
    return path


def test_a_row_missing_a_key_names_file_model_and_key(tmp_path: Path) -> None:
    row = dict(model_thresholds.table()[LOCAL_EMBEDDER])
    del row["generation.min_support"]
    path = write(tmp_path, row)
    with pytest.raises(ImproperlyConfigured, match=r"thresholds.json: local/x: .*missing generation.min_support"):
        model_thresholds.table(path)


def test_a_row_with_a_non_number_or_unknown_key_is_refused(tmp_path: Path) -> None:
    row = dict(model_thresholds.table()[LOCAL_EMBEDDER])
    with pytest.raises(ImproperlyConfigured, match="retrieval.min_score must be numbers"):
        model_thresholds.table(write(tmp_path, {**row, "retrieval.min_score": "high"}))
    with pytest.raises(ImproperlyConfigured, match="unknown retrieval.top_k"):
        model_thresholds.table(write(tmp_path, {**row, "retrieval.top_k": 3}, "other.json"))


def test_an_unreadable_file_is_named(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text("{not json")
    with pytest.raises(ImproperlyConfigured, match="broken.json: cannot read"):
        model_thresholds.table(path)
