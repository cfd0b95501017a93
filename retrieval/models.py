"""The search proxy over chunks: the raw-SQL search managers attached to ``sources.Chunk``."""

from __future__ import annotations

from typing import ClassVar

from django.db import models

from retrieval.search import ChunkSearchManager
from sources.models import Chunk


class ChunkSearch(Chunk):
    """Chunk with the raw-SQL search manager attached (``ChunkSearch.search.keyword(...)``)."""

    objects: ClassVar[models.Manager[ChunkSearch]] = models.Manager()
    search = ChunkSearchManager()

    class Meta:
        proxy = True
