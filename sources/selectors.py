"""Reads over sources and chunks."""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Q, QuerySet
from django.utils import timezone

from sources.models import Chunk, Collection, IngestJob, Source


def chunks_for_export(*, collection: str | None = None) -> Iterator[Chunk]:
    qs = Chunk.objects.select_related("source").filter(source__status=Source.Status.INGESTED)
    if collection:
        qs = qs.filter(source__collection__name=collection)
    return qs.order_by("source__path", "ordinal").iterator(chunk_size=500)


def index_overview() -> list[dict]:
    """Per collection: sources by status and chunk count."""
    rows = []
    for source in Source.objects.select_related("collection").order_by("collection__name", "path"):
        rows.append({"collection": source.collection.name, "path": source.path, "title": source.title,
                     "status": source.status, "chunks": source.chunk_count, "reason": source.reason})
    return rows


def index_counts(*, model: str) -> dict[str, int]:
    """Chunk rows, FTS rows and vectors for ``model``: the three must always agree."""
    from django.db import connection

    from sources import vectorstore

    with connection.cursor() as cur:
        cur.execute("SELECT count(*) FROM chunks_fts")
        fts = cur.fetchone()[0]
    return {"chunks": Chunk.objects.count(), "fts": fts, "vectors": vectorstore.vector_count(model)}


from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Q, QuerySet
from django.utils import timezone

from sources.models import Chunk, Collection, IngestJob, Source
