"""How a unit's score is made of what is measured of it, with weights that are data, one set per embedding model.

A unit's score is its cosine with the question plus weighted terms (``score``): the share of the question's words
it holds (``lexical``; a word only its heading path or title holds counts ``under`` of one), and three marks, each
worth its weight: it stands in a passage a follow-up's earlier answer quoted (``follow``), it defines a code the
question names (``defines``: "**E04 – Network error.** …" for "What does E04 mean?"), it is an instruction where the
question asks what to do (``instructs``). For a follow-up the cosine is also taken with the earlier answer's quotes
followed by the message, less ``continues`` (the quotes are not what is asked). The weights are data,
``data/scoring.json``, one set per embedding model (cosines are on each model's own scale): ``bench/fit_scoring.py``
fits them and writes each set with the command, the questions it was fitted on and its held-out figures; a set made
otherwise says how (``set_by_hand``, naming the decision and the fit that was not kept).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from functools import cache
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

DATA = Path(__file__).resolve().parent.parent / "data" / "scoring.json"


@dataclass(frozen=True)
class Weights:
    lexical: float
    under: float
    continues: float
    follow: float
    defines: float
    instructs: float


NAMES = tuple(f.name for f in fields(Weights))


@dataclass(frozen=True)
class Parts:
    """What is measured of one unit, before any weight: its best cosine with the question (as asked and, for a
    follow-up, as typed), with the earlier answer's quotes and the message (``after``; None when not a follow-up
    going on from quotes), the question's own words it holds and those only its heading path or title holds, how many
    own words the question has, whether it holds a word carried over from earlier turns (None when none is carried),
    and its three marks."""

    asked: float
    after: float | None
    held: int
    under: int
    own: int
    carried: bool | None
    follow: bool
    defines: bool
    instructs: bool

    def cosine(self, w: Weights) -> float:
        return self.asked if self.after is None else max(self.asked, self.after - w.continues)

    def lexical(self, w: Weights) -> float:
        count = self.held + w.under * self.under
        if self.carried is None:
            return count / self.own if self.own else 0.0
        return (count + self.carried) / (self.own + 1)

    def score(self, w: Weights) -> float:
        return (
            self.cosine(w)
            + w.lexical * self.lexical(w)
            + w.follow * self.follow
            + w.defines * self.defines
            + w.instructs * self.instructs
        )

    def as_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@cache
def table(path: Path = DATA) -> dict[str, Weights]:
    """``{embedding model: Weights}`` from ``path``; each entry gives every weight (``NAMES``), none negative, and
    says how they were made."""
    try:
        entries = json.loads(path.read_text(encoding="utf-8"))["models"]
        out = {}
        for name, entry in entries.items():
            missing = [k for k in NAMES if k not in entry["weights"]]
            if missing:
                raise ValueError(f"{name}: weights lack {', '.join(missing)}")
            if not entry.get("fitted") and not entry.get("set_by_hand"):
                raise ValueError(
                    f"{name}: say how the weights were made: `fitted` (bench/fit_scoring.py) or `set_by_hand`"
                )
            weights = Weights(**{k: float(entry["weights"][k]) for k in NAMES})
            if any(getattr(weights, k) < 0 for k in NAMES):
                raise ValueError(f"{name}: a weight is negative")
            out[name] = weights
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ImproperlyConfigured(f"{path}: cannot read the reader's scoring weights: {exc}") from None
    return out


def weights_for(embedding_model: str, path: Path = DATA) -> Weights:
    """The scoring weights of ``embedding_model``; a clear error when it has none."""
    found = table(path).get(embedding_model)
    if found is None:
        raise ImproperlyConfigured(
            f"the extractive reader has no scoring weights for embedding.model {embedding_model!r} "
            f"({path.name} holds {', '.join(sorted(table(path)))}): fit them with "
            "`python bench/fit_scoring.py` under that embedding model, or choose another generation.model"
        )
    return found
