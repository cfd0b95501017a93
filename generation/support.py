"""Grounding with real embeddings: one embedding call per batch of new text pieces."""
from __future__ import annotations

from django.conf import settings

from foundry_site import llm
from generation.grounding import Grounded, ground, passage_windows, split_sentences
from retrieval.services.retrieve import Candidate


class Grounder:
    """Checks texts against the passages given to the model (see ``grounding.ground``).

    ``included`` is the candidates, or (on a compute worker, which has no database
    rows) their passage texts by label. ``embedding_model`` and ``min_support``
    default to the settings.
    """

    def __init__(self, included: list[Candidate] | dict[str, str], *, embedding_model: str | None = None,
                 min_support: float | None = None) -> None:
        self.passages = included if isinstance(included, dict) else {c.label: c.chunk.text for c in included}
        self.embedding_model = embedding_model or settings.FOUNDRY.embedding.model
        self.min_support = settings.FOUNDRY.generation.min_support if min_support is None else min_support
        self.vectors: dict[str, list[float]] = {}
        self.prime([w for p in self.passages.values() for w in passage_windows(p)])

    def prime(self, pieces: list[str]) -> None:
        """Embed, in one call, every sentence of ``pieces`` not embedded yet."""
        wanted = [s.text for piece in pieces for s in split_sentences(piece)] + pieces
        missing = [p for p in dict.fromkeys(wanted) if p not in self.vectors]
        if missing:
            vectors = llm.embed(missing, model=self.embedding_model)
            self.vectors.update(zip(missing, vectors))

    def similarity(self, sentence: str, window: str) -> float:
        a, b = self.vectors.get(sentence), self.vectors.get(window)
        return sum(x * y for x, y in zip(a, b)) if a and b else 0.0

    def ground(self, text: str) -> Grounded:
        self.prime([text])
        return ground(text, self.passages, similarity=self.similarity, min_support=self.min_support)
