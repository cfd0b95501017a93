"""Whether the extractive reader's reading answers its question: a logistic model fitted on data.

The reader finds the unit that fits a question best; whether that unit *answers* it is a separate
judgement, which one threshold on the unit's score made badly (an adversarial question reads as close
as the one its passage answers). Here it is a probability from a few features of the reading that mean
the same in every language: the best unit's score, cosine and share of question words held, its lead
over the next unit, the gate's best similarity, the share of the question's words some passage read
holds, and how many words the question and the passages have (``FEATURES``). The weights (with the
features' means and scales) are data, ``data/answerability.json``, one model per embedding model,
each with the command, the questions it was fitted on and its held-out figures; ``bench/fit_answerability.py``
writes them, with the two thresholds fitted beside them: a probability under ``refuse_below`` is no answer
(refusal "reader"), under ``low_below`` a low-confidence one (``generation.reader_min_score`` and
``reader_low_score`` in foundry.yaml set them instead).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from generation import reader

DATA = Path(__file__).resolve().parent / "data" / "answerability.json"
FEATURES = (
    "best_score",
    "best_cosine",
    "best_lexical",
    "lead",
    "gate_score",
    "coverage",
    "asked_words",
    "units",
)


@dataclass(frozen=True)
class Model:
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    weights: tuple[float, ...]
    intercept: float
    refuse_below: float
    low_below: float

    def probability(self, features: dict[str, float]) -> float:
        z = self.intercept + sum(
            w * (features[name] - m) / s
            for name, m, s, w in zip(FEATURES, self.mean, self.scale, self.weights, strict=True)
        )
        return 1.0 / (1.0 + math.exp(-z)) if z > -700 else 0.0


def features(question: str, passages: list[reader.Passage], reading: reader.Reading, gate_score: float) -> dict:
    """The reading's features (``FEATURES``), in the question's language where words are counted."""
    scored = reading.scored
    best = scored[0] if scored else None
    second = scored[1].score if len(scored) > 1 else 0.0
    asked, held = reader.coverage(question, passages)
    return {
        "best_score": reading.best,
        "best_cosine": best.cosine if best else 0.0,
        "best_lexical": best.lexical if best else 0.0,
        "lead": reading.best - second if best else 0.0,
        "gate_score": gate_score,
        "coverage": held / asked if asked else 1.0,
        "asked_words": math.log1p(asked),
        "units": math.log1p(len(scored)),
    }


@cache
def models(path: Path = DATA) -> dict[str, Model]:
    """``{embedding model: Model}`` from ``path``; each must give a mean, scale and weight per feature."""
    try:
        entries = json.loads(path.read_text(encoding="utf-8"))["models"]
        out = {}
        for name, entry in entries.items():
            if tuple(entry["features"]) != FEATURES:
                raise ValueError(f"{name}: features must be {', '.join(FEATURES)} in this order")
            model = Model(
                tuple(map(float, entry["mean"])),
                tuple(map(float, entry["scale"])),
                tuple(map(float, entry["weights"])),
                float(entry["intercept"]),
                float(entry["refuse_below"]),
                float(entry["low_below"]),
            )
            if not len(model.mean) == len(model.scale) == len(model.weights) == len(FEATURES):
                raise ValueError(f"{name}: mean, scale and weights need one value per feature")
            if any(s <= 0 for s in model.scale):
                raise ValueError(f"{name}: every scale must be positive")
            if not 0 <= model.refuse_below <= model.low_below <= 1:
                raise ValueError(f"{name}: need 0 <= refuse_below <= low_below <= 1")
            out[name] = model
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ImproperlyConfigured(f"{path}: cannot read the answerability models: {exc}") from None
    return out


def thresholds(model: Model, configured_min: float | None, configured_low: float | None) -> tuple[float, float]:
    """(refuse below, low confidence below): foundry.yaml's ``reader_min_score`` / ``reader_low_score`` where set,
    else the model's fitted ones; the low one never under the refusing one."""
    refuse = model.refuse_below if configured_min is None else configured_min
    low = model.low_below if configured_low is None else configured_low
    return refuse, max(low, refuse)


def model_for(embedding_model: str, path: Path = DATA) -> Model:
    """The answerability model fitted for ``embedding_model``; a clear error when none is."""
    found = models(path).get(embedding_model)
    if found is None:
        raise ImproperlyConfigured(
            f"the extractive reader has no answerability model for embedding.model {embedding_model!r} "
            f"({path.name} holds {', '.join(sorted(models(path)))}): fit one with "
            "`python bench/fit_answerability.py` under that embedding model, or choose another generation.model"
        )
    return found
