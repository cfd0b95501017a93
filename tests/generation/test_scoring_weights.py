"""The reader's scoring weights: their data file, and how a unit's score is made of what was measured of it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from core import model_thresholds
from core.config import FoundryConfig
from generation.reader import weights
from generation.reader.weights import Parts, Weights

W = Weights(lexical=0.5, under=0.5, continues=0.1, follow=0.2, defines=0.3, instructs=0.4)


def parts(**changes: object) -> Parts:
    base = dict(
        asked=0.6, after=None, held=1, under=1, own=4, carried=None, follow=False, defines=False, instructs=False
    )
    return Parts(**(base | changes))


def write(tmp_path: Path, models: dict) -> Path:
    path = tmp_path / "scoring.json"
    path.write_text(json.dumps({"models": models}))
    return path


def test_every_shipped_set_names_a_local_embedding_model_and_how_it_was_made() -> None:
    shipped = weights.table()
    assert FoundryConfig().embedding.model in shipped
    for name in shipped:
        assert name in model_thresholds.table(), name
        entry = json.loads(weights.DATA.read_text())["models"][name]
        if "fitted" in entry:
            assert entry["fitted"]["command"].startswith("bench/fit_scoring.py"), name
            assert entry["fitted"]["held_out"]["questions"] > 0, name
        else:
            assert re.search(r"\bD\d{4}\b", entry["set_by_hand"]), f"{name}: name the decision that set them"


def test_the_score_is_the_cosine_plus_the_weighted_share_of_words_and_marks() -> None:
    assert parts().lexical(W) == pytest.approx((1 + 0.5 * 1) / 4)
    assert parts().score(W) == pytest.approx(0.6 + 0.5 * 1.5 / 4)
    marked = parts(follow=True, defines=True, instructs=True)
    assert marked.score(W) == pytest.approx(parts().score(W) + 0.2 + 0.3 + 0.4)
    assert parts(own=0, held=0, under=0).lexical(W) == 0.0


def test_carried_words_count_as_one_word_more() -> None:
    assert parts(carried=True).lexical(W) == pytest.approx((1 + 0.5 + 1) / 5)
    assert parts(carried=False).lexical(W) == pytest.approx((1 + 0.5) / 5)


def test_a_follow_up_reads_as_going_on_from_the_answer_before_less_the_discount() -> None:
    assert parts(after=0.9).cosine(W) == pytest.approx(0.8)
    assert parts(after=0.65).cosine(W) == pytest.approx(0.6)  # the question itself reads closer


def test_a_set_lacking_a_weight_names_the_file_model_and_weight(tmp_path: Path) -> None:
    path = write(tmp_path, {"local/x": {"weights": {"lexical": 0.5}, "set_by_hand": "D0001"}})
    with pytest.raises(ImproperlyConfigured, match=r"scoring.json: .*local/x: weights lack under, continues"):
        weights.table(path)


def test_a_negative_weight_is_refused(tmp_path: Path) -> None:
    path = write(
        tmp_path, {"local/x": {"weights": dict.fromkeys(weights.NAMES, 0.1) | {"follow": -0.1}, "set_by_hand": "D0001"}}
    )
    with pytest.raises(ImproperlyConfigured, match="local/x: a weight is negative"):
        weights.table(path)


def test_an_embedding_model_without_weights_is_a_clear_error(tmp_path: Path) -> None:
    path = write(tmp_path, {"local/x": {"weights": dict.fromkeys(weights.NAMES, 0.1), "set_by_hand": "D0001"}})
    with pytest.raises(ImproperlyConfigured, match=r"no scoring weights for embedding.model .openai/e.*fit_scoring"):
        weights.weights_for("openai/e", path)


def test_a_set_that_does_not_say_how_it_was_made_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, {"local/x": {"weights": dict.fromkeys(weights.NAMES, 0.1)}})
    with pytest.raises(ImproperlyConfigured, match="local/x: say how the weights were made"):
        weights.table(path)
