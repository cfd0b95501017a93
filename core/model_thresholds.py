"""Per embedding model defaults of the thresholds that read its similarity scale.

Cosine similarities of different embedding models live on different scales (MiniLM: unrelated
texts near 0.1; multilingual-e5-small: near 0.75), so the gate's, reader's and grounding's
thresholds are calibrated per model. The calibrated values are data,
``data/embedding_thresholds.json``, each model with the command that produced them.

A threshold set in foundry.yaml wins; one left out takes the configured embedding model's
calibrated value; a model missing from the file (a remote one) keeps the class defaults
in ``config.py``, which are all-MiniLM-L6-v2's.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

DATA = Path(__file__).resolve().parent / "data" / "embedding_thresholds.json"
# Every key whose meaning depends on the embedding model's similarity scale ("section.key").
KEYS = (
    "retrieval.min_score",
    "generation.low_confidence_score",
    "generation.min_support",
    "generation.writer_min_score",
)


@cache
def table(path: Path = DATA) -> dict[str, dict[str, float]]:
    """``{model: {"section.key": value}}`` from ``path``; every model must give every key of KEYS."""
    try:
        models = json.loads(path.read_text(encoding="utf-8"))["models"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ImproperlyConfigured(f"{path}: cannot read the per-model thresholds: {exc}") from None
    out: dict[str, dict[str, float]] = {}
    for model, entry in models.items():
        values = entry.get("thresholds") if isinstance(entry, dict) else None
        if not isinstance(values, dict):
            raise ImproperlyConfigured(f"{path}: {model}: expected a 'thresholds' mapping")
        missing, unknown = set(KEYS) - set(values), set(values) - set(KEYS)
        if missing or unknown:
            raise ImproperlyConfigured(
                f"{path}: {model}: thresholds must give exactly {', '.join(KEYS)}"
                + (f"; missing {', '.join(sorted(missing))}" if missing else "")
                + (f"; unknown {', '.join(sorted(unknown))}" if unknown else "")
            )
        bad = [k for k, v in values.items() if isinstance(v, bool) or not isinstance(v, int | float)]
        if bad:
            raise ImproperlyConfigured(f"{path}: {model}: {', '.join(bad)} must be numbers")
        out[model] = {k: float(v) for k, v in values.items()}
    return out


def fill(data: dict, model: str, path: Path = DATA) -> tuple[dict, frozenset[str]]:
    """``data`` (foundry.yaml as parsed) with each threshold it leaves out taken from ``model``'s row,
    and the keys so taken. Sections that are not mappings are left for validation to name."""
    defaults = table(path).get(model, {})
    filled = {name: dict(section) if isinstance(section, dict) else section for name, section in data.items()}
    taken = set()
    for key, value in defaults.items():
        section, name = key.split(".")
        target = filled.setdefault(section, {})
        if isinstance(target, dict) and name not in target:
            target[name] = value
            taken.add(key)
    return filled, frozenset(taken)
