"""The extractive reader's answerability model: its data file, its probability, its features."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from core import model_thresholds
from core.config import FoundryConfig
from generation import answerability
from generation.reader import Passage, Quote, Reading
from core.units import passage_units


def entry(**changes: object) -> dict:
    n = len(answerability.FEATURES)
    return {
        "features": list(answerability.FEATURES),
        "mean": [0.0] * n,
        "scale": [1.0] * n,
        "weights": [0.0] * n,
        "intercept": 0.0,
        "refuse_below": 0.3,
        "low_below": 0.5,
    } | changes


def write(tmp_path: Path, models: dict) -> Path:
    path = tmp_path / "answerability.json"
    path.write_text(json.dumps({"models": models}))
    return path


def test_every_shipped_model_names_a_local_embedding_model_and_how_it_was_fitted() -> None:
    shipped = answerability.models()
    assert shipped, "no answerability model is shipped"
    for name in shipped:
        assert name in model_thresholds.table(), name
        fitted = json.loads(answerability.DATA.read_text())["models"][name]["fitted"]
        assert fitted["command"].startswith("bench/fit_answerability.py") and fitted["held_out"]["rows"] > 0


def test_the_default_embedding_model_has_a_model() -> None:
    answerability.model_for(FoundryConfig().embedding.model)


def test_probability_is_the_logistic_of_the_standardised_weighted_sum() -> None:
    n = len(answerability.FEATURES)
    model = answerability.Model((1.0,) * n, (2.0,) * n, (0.5,) + (0.0,) * (n - 1), -0.25, 0.3, 0.5)
    features = dict.fromkeys(answerability.FEATURES, 1.0) | {"best_score": 3.0}
    assert model.probability(features) == pytest.approx(1 / (1 + math.exp(-(0.5 * (3.0 - 1.0) / 2.0 - 0.25))))
    assert model.probability(features | {"best_score": -1e6}) == 0.0  # far below: no overflow


def test_a_model_without_a_feature_value_names_the_file_and_reason(tmp_path: Path) -> None:
    path = write(tmp_path, {"local/x": entry(weights=[0.0])})
    with pytest.raises(ImproperlyConfigured, match=r"answerability.json: .*local/x: mean, scale and weights"):
        answerability.models(path)


def test_features_in_another_order_are_refused(tmp_path: Path) -> None:
    path = write(tmp_path, {"local/x": entry(features=list(reversed(answerability.FEATURES)))})
    with pytest.raises(ImproperlyConfigured, match="local/x: features must be"):
        answerability.models(path)


def test_a_zero_scale_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, {"local/x": entry(scale=[0.0] * len(answerability.FEATURES))})
    with pytest.raises(ImproperlyConfigured, match="every scale must be positive"):
        answerability.models(path)


def test_an_embedding_model_without_a_fit_is_a_clear_error(tmp_path: Path) -> None:
    path = write(tmp_path, {"local/x": entry()})
    with pytest.raises(ImproperlyConfigured, match=r"no answerability model for embedding.model .openai/e.*fit_answer"):
        answerability.model_for("openai/e", path)


def test_thresholds_set_in_foundry_yaml_win_and_low_is_never_under_refuse(tmp_path: Path) -> None:
    model = answerability.models(write(tmp_path, {"local/x": entry()}))["local/x"]
    assert answerability.thresholds(model, None, None) == (0.3, 0.5)
    assert answerability.thresholds(model, 0.6, None) == (0.6, 0.6)
    assert answerability.thresholds(model, 0.1, 0.2) == (0.1, 0.2)


def test_thresholds_out_of_order_are_refused(tmp_path: Path) -> None:
    path = write(tmp_path, {"local/x": entry(refuse_below=0.6, low_below=0.5)})
    with pytest.raises(ImproperlyConfigured, match="refuse_below <= low_below"):
        answerability.models(path)


def test_features_of_a_reading() -> None:
    passage = Passage("S1", "The pump delivers 40 litres a minute. It weighs 3 kg.", 1, 1, under="Pump manual > Data")
    units = passage_units(passage.text)
    scored = [Quote(passage, units[0], 1.2, 0.7, 1.0), Quote(passage, units[1], 0.5, 0.4, 0.2)]
    reading = Reading(scored[:1], 1.2, scored)
    got = answerability.features("How many litres does the pump deliver?", [passage], reading, gate_score=0.6)
    assert set(got) == set(answerability.FEATURES)
    assert got["best_score"] == 1.2 and got["best_cosine"] == 0.7 and got["lead"] == pytest.approx(0.7)
    assert got["coverage"] == 1.0 and got["gate_score"] == 0.6 and got["units"] == pytest.approx(math.log1p(2))
    unheld = answerability.features("How loud is the fan?", [passage], reading, gate_score=0.6)
    assert unheld["coverage"] < 1.0
