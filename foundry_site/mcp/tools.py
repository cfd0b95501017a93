"""What the MCP tools and resources do, synchronous and transport-free.

Each function takes the acting user first and returns JSON-ready data. Everything is
read through the sources selectors for that user: a collection, source or chunk outside
their collections is "not found", with the same message as one that does not exist.
``search`` and ``ask`` are queries: they count against the user's query rate limit
(``FOUNDRY_QUERY_RATE``, shared with the API and the ask page) and each leaves a
``QueryLog`` row (a search's row has ``kind=search`` and no answer). Bad input raises
``ToolInputError`` (or ``QueryError`` / ``RateLimited``) with a message an agent can act on.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from django.conf import settings
from django.db.models import Count

from core.ratelimit import rate_limit_enforce
from core.text import TextRejected, user_text
from generation.answers import MAX_QUESTION_CHARS, question_clean, querylog_row
from generation.asking import NO_COLLECTIONS, query_answer
from generation.models import QueryLog
from retrieval.services.retrieve import Candidate, retrieve
from sources.models import Chunk, Source, location_fields
from sources.selectors import query_scope, readable_chunks, readable_collections, readable_sources
from sources.viewer import viewer_url

MAX_K = 50  # as POST /api/v1/query's top_k
MAX_NEIGHBOURS = 5
MAX_SOURCES_LISTED = 500
SOURCE_URI = "foundry://source/{source_id}"


class ToolInputError(ValueError):
    """The call cannot be carried out as asked; the message tells the caller what to change."""


def source_uri(source_id: int) -> str:
    return SOURCE_URI.format(source_id=source_id)


# --------------------------------------------------------------------------- queries


def search(user: Any, *, query: str, collection: str | None = None, k: int | None = None) -> dict[str, Any]:
    """The best chunks for ``query`` in the user's collections, with the gate's verdict; never calls an LLM.

    Counts one query against the rate limit and records one ``QueryLog`` row of kind ``search``.
    """
    query = query_clean(query)
    top_k = k_check(k)
    within = collection_id(user, collection)
    rate_limit_enforce(user.pk)
    scope = [within] if within is not None else user_scope(user)
    started = time.perf_counter()
    found = retrieve(question=query, collection_ids=scope, top_k=top_k, model_steps=False)
    min_score = settings.FOUNDRY.retrieval.min_score
    results = [hit_dict(c, min_score=min_score) for c in found.ranked]
    timings = {**found.timings, "total": round((time.perf_counter() - started) * 1000, 1)}
    run_id = uuid.uuid4().hex
    row = querylog_row(
        run_id=run_id,
        task_name="mcp_search",
        kind=QueryLog.Kind.SEARCH,
        user=user,
        question=query,
        mode=found.mode,
        collection_ids=scope,
        channels=found.channels_dict(),
        gate=found.gate.as_dict() if found.gate else {},
        citations=[{"id": f"#{rank}", **r} for rank, r in enumerate(results, start=1)],
        timings=timings,
    )
    return {"query_id": row.pk, "query": query, "mode": found.mode, "gate": row.gate, "results": results}


def ask(user: Any, *, question: str, collection: str | None = None) -> dict[str, Any]:
    """The verified answer with its citations, or the refusal and its reason (``generation.asking``).

    Rate-limited and scoped like ``POST /api/v1/query``; the answer's ``QueryLog`` row is ``query_id``.
    """
    question_clean(question)  # an unusable question is refused before it counts against the limit
    within = collection_id(user, collection)
    answer, row = query_answer(user=user, question=question, within=within)
    return {
        "query_id": row.pk,
        "answer_class": answer.answer_class,
        "answer": answer.answer,
        "refusal": answer.refusal,
        "hint": answer.hint,
        "citations": cited_in_viewer(answer.citations),
        "conflicts": answer.conflicts,
        "coverage": answer.coverage,
        "gate": answer.gate,
        "cached": answer.cached,
    }


def cited_in_viewer(citations: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each citation with ``viewer_url``, the web viewer at its quoted lines: the link the ask page gives it."""
    sources = dict(Chunk.objects.filter(pk__in=[c["chunk_id"] for c in citations]).values_list("pk", "source_id"))
    return [
        {**c, "viewer_url": viewer_url(sources[c["chunk_id"]], c["chunk_id"], c.get("lines"))}
        if c["chunk_id"] in sources
        else c
        for c in citations
    ]


def query_clean(query: str) -> str:
    """The query as search reads it (as a question: whitespace collapsed); ToolInputError when unusable."""
    try:
        return user_text(query, what="query", max_chars=MAX_QUESTION_CHARS)
    except TextRejected as exc:
        raise ToolInputError(str(exc)) from None


def k_check(k: int | None) -> int | None:
    if k is None:
        return None
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
        raise ToolInputError(f"k must be a whole number from 1 to {MAX_K} (got {k!r}).")
    return k


def collection_id(user: Any, name: str | None) -> int | None:
    """The id of the readable collection ``name``; None when no collection was named."""
    if name is None:
        return None
    found = readable_collections(user).filter(name=name).values_list("pk", flat=True).first()
    if found is None:
        raise ToolInputError(f"Collection {name!r} not found. list_collections names the collections you can read.")
    return found


def user_scope(user: Any) -> list[int] | None:
    scope = query_scope(user)
    if scope == []:
        raise ToolInputError(NO_COLLECTIONS)
    return scope


def hit_dict(candidate: Candidate, *, min_score: float) -> dict[str, Any]:
    chunk = candidate.chunk
    return {
        **location(chunk),
        "source": chunk.source.name,
        "source_id": chunk.source_id,
        "uri": source_uri(chunk.source_id),
        "title": chunk.source.title,
        "score": round(candidate.score, 4),
        "fused": round(candidate.fused, 6),
        "ranks": candidate.ranks,
        "passes_gate": candidate.score >= min_score,
        "text": chunk.text,
    }


def location(chunk: Chunk) -> dict[str, Any]:
    return {
        "chunk_id": chunk.pk,
        "ordinal": chunk.ordinal,
        "heading": chunk.heading,
        "page": chunk.page_start,
        "lines": [chunk.line_start, chunk.line_end],
        **location_fields(chunk),
        "where": chunk.location,
        # The web viewer at this passage (a path on the Foundry site: over stdio there is no host to name).
        "viewer_url": viewer_url(chunk.source_id, chunk.pk),
    }


# --------------------------------------------------------------------------- reads


def get_chunk(user: Any, *, chunk_id: int, neighbours: int = 0) -> dict[str, Any]:
    """One readable chunk with its text and location, and up to ``neighbours`` chunks on each side."""
    if isinstance(neighbours, bool) or not isinstance(neighbours, int) or not 0 <= neighbours <= MAX_NEIGHBOURS:
        raise ToolInputError(f"neighbours must be a whole number from 0 to {MAX_NEIGHBOURS} (got {neighbours!r}).")
    chunk = readable_chunks(user).select_related("source__collection").filter(pk=chunk_id).first()
    if chunk is None:
        raise ToolInputError(f"Chunk {chunk_id} not found.")
    around = []
    if neighbours:
        around = list(
            Chunk.objects.filter(
                source_id=chunk.source_id,
                ordinal__gte=chunk.ordinal - neighbours,
                ordinal__lte=chunk.ordinal + neighbours,
            )
            .exclude(pk=chunk.pk)
            .order_by("ordinal")
        )
    return {
        "chunk": {**location(chunk), "text": chunk.text},
        "source": source_dict(chunk.source),
        "before": [{**location(c), "text": c.text} for c in around if c.ordinal < chunk.ordinal],
        "after": [{**location(c), "text": c.text} for c in around if c.ordinal > chunk.ordinal],
    }


def list_collections(user: Any) -> dict[str, Any]:
    """The collections the user can read, with how many ingested sources each holds."""
    rows = list(readable_collections(user).order_by("name"))
    counts = dict(
        Source.objects.filter(collection__in=[c.pk for c in rows], status=Source.Status.INGESTED)
        .values("collection_id")
        .annotate(n=Count("id"))
        .values_list("collection_id", "n")
    )
    return {
        "collections": [
            {"name": c.name, "description": c.description, "public": c.public, "sources": counts.get(c.pk, 0)}
            for c in rows
        ]
    }


def list_sources(user: Any, *, collection: str | None = None) -> dict[str, Any]:
    """The user's readable sources (in ``collection``, if named), each with its resource URI."""
    rows = readable_sources(user).select_related("collection")
    within = collection_id(user, collection)
    if within is not None:
        rows = rows.filter(collection_id=within)
    listed = list(rows.order_by("collection__name", "path")[: MAX_SOURCES_LISTED + 1])
    return {
        "sources": [source_dict(s) for s in listed[:MAX_SOURCES_LISTED]],
        "truncated": len(listed) > MAX_SOURCES_LISTED,
    }


def source_dict(source: Source) -> dict[str, Any]:
    return {
        "source_id": source.pk,
        "uri": source_uri(source.pk),
        "name": source.name,
        "title": source.title,
        "kind": source.kind,
        "collection": source.collection.name,
        "status": source.status,
        "chunks": source.chunk_count,
    }


# --------------------------------------------------------------------------- resources


def readable_source_refs(user: Any) -> list[dict[str, Any]]:
    """The ingested sources the user can read, as resource listings (uri, name, title)."""
    rows = (
        readable_sources(user)
        .filter(status=Source.Status.INGESTED)
        .select_related("collection")
        .order_by("collection__name", "path")[:MAX_SOURCES_LISTED]
    )
    return [
        {
            "uri": source_uri(s.pk),
            "name": s.name,
            "title": s.title or s.name,
            "description": f"{s.kind or 'document'} in collection {s.collection.name}, {s.chunk_count} chunks",
        }
        for s in rows
    ]


def read_source(user: Any, *, source_id: str | int) -> dict[str, Any]:
    """A readable source and all its chunks in order, each with its location."""
    text = str(source_id)
    source = None
    if text.isascii() and text.isdigit() and len(text) < 19:
        source = readable_sources(user).select_related("collection").filter(pk=int(text)).first()
    if source is None:
        raise ToolInputError(f"Source {text[:40]!r} not found.")
    chunks = source.chunks.order_by("ordinal")
    return {"source": source_dict(source), "chunks": [{**location(c), "text": c.text} for c in chunks]}
