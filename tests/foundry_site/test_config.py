from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from django.core.exceptions import ImproperlyConfigured

from core.config import FoundryConfig, load_config, parse_config


def test_defaults_are_offline() -> None:
    conf = FoundryConfig()
    assert conf.embedding.model == "local/all-minilm-l6-v2" and conf.generation.model == "extractive"
    assert conf.ingest.summary_model == "extractive" and conf.llm_models() == set()
    assert conf.retrieval.mode == "hybrid" and conf.retrieval.top_k == 10 and conf.ingest.max_file_mb == 25


def test_shipped_foundry_yaml_is_valid() -> None:
    load_config(Path(__file__).resolve().parents[2] / "foundry.yaml")


def test_shipped_foundry_yaml_lists_every_key_with_its_default() -> None:
    """docs/installation.md promises the file in the repository shows every knob and its default."""
    shipped = yaml.safe_load((Path(__file__).resolve().parents[2] / "foundry.yaml").read_text())
    assert shipped == FoundryConfig().model_dump(mode="json")


@pytest.mark.parametrize(
    "data,message",
    [
        ({"retrieval": {"mode": "fuzzy"}}, "retrieval.mode: invalid value 'fuzzy'"),
        ({"retrieval": {"top_k": 0}}, "retrieval.top_k: invalid value 0"),
        ({"retrieval": {"min_score": 1.5}}, "retrieval.min_score: invalid value 1.5"),
        ({"retrieval": {"top_k": "ten"}}, "retrieval.top_k: invalid value 'ten'"),
        ({"ingest": {"max_file_mb": -1}}, "ingest.max_file_mb: invalid value -1"),
        (
            {"generation": {"model": "gpt4"}},
            "generation.model: invalid value 'gpt4': Value error, expected 'extractive'",
        ),
        ({"embedding": {"model": "none"}}, "the embedding model cannot be 'none'"),
        ({"retrieval": {"hyde": "yes"}}, "retrieval.hyde: invalid value 'yes'"),
        ({"retreival": {"top_k": 5}}, "retreival: unknown key"),
        ({"retrieval": {"topk": 5}}, "retrieval.topk: unknown key"),
        (["not", "a", "mapping"], "expected a mapping of sections"),
    ],
)
def test_invalid_values_name_key_value_and_rule(data: object, message: str) -> None:
    with pytest.raises(ImproperlyConfigured) as info:
        parse_config(data)
    assert message in str(info.value)


def test_bad_yaml_file(tmp_path: Path) -> None:
    path = tmp_path / "foundry.yaml"
    path.write_text("retrieval: [unclosed")
    with pytest.raises(ImproperlyConfigured, match="not valid YAML"):
        load_config(path)


def test_none_switches_llm_roles_off() -> None:
    conf = parse_config({"ingest": {"summary_model": "none"}, "generation": {"model": "none"}})
    assert conf.llm_models() == set()


def test_missing_api_key_is_a_startup_error(monkeypatch: pytest.MonkeyPatch, settings) -> None:
    from foundry_site.db.checks import check_models
    from tests.conftest import config_with

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    settings.FOUNDRY = config_with(settings.FOUNDRY, generation={"model": "openai/gpt-4o"})
    errors = check_models()
    assert [e.id for e in errors] == ["foundry.E003"] and "OPENAI_API_KEY" in errors[0].msg
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    assert check_models() == []
