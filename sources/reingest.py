"""Groups of ingested sources that one ``foundry ingest`` brings up to date: what ``sources.selectors`` reports
as stale, and what ``sources.vectorstore.EmbeddingModelChanged`` lists with the commands that fix it."""

from __future__ import annotations

import shlex
from dataclasses import dataclass


@dataclass(frozen=True)
class ReingestGroup:
    """Ingested sources of one collection and folder that one ``foundry ingest`` brings up to date."""

    collection: str
    root: str
    sources: int
    private: bool  # some lie under private/, so their re-ingest needs --include-private

    @property
    def reingest_command(self) -> str:
        """The command that ingests these sources again with the configured settings (only files whose
        settings or bytes differ are redone)."""
        flag = " --include-private" if self.private else ""
        return f"foundry ingest {shlex.quote(self.root)} --collection {shlex.quote(self.collection)}{flag}"


@dataclass(frozen=True)
class StaleEmbeddings(ReingestGroup):
    """Sources whose vectors come from another embedding model."""

    model: str = ""  # the model they were embedded with


@dataclass(frozen=True)
class ChunkingDrift(ReingestGroup):
    """Sources whose chunks were built with other chunking settings."""

    chunking: str = ""  # the settings they were chunked with (``Source.chunking``; "" if never recorded)
