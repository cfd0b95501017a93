"""Retrieval: HyDE → dense + BM25 → rank fusion → gate → relevance scoring → conflicts.

This is the shared front half of answering and document generation; the gate
here decides, before any generation call, whether evidence exists.
"""

from __future__ import annotations

import contextvars
import functools
import json
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings

from core import llm, prompts
from retrieval import dense, dense_matrix
from retrieval.models import ChunkSearch
from retrieval.fusion import (
    ChunkFacts,
    Hit,
    document_rank_fusion,
    recency_boost,
    reciprocal_rank_fusion,
    word_set,
)
from retrieval.services.conflicts import Conflict, Passage, conflicts_detect
from retrieval.services.gate import GateDecision, gate_decide
from retrieval.services.scoring import relevance_score
from sources import vectorstore
from sources.models import Chunk, location_fields
from sources.selectors import stale_embeddings

CANDIDATE_FACTOR = 5  # each channel returns this many times top_k before fusion
QUOTE_HITS = 10  # keyword hits searched for a sentence an earlier answer quoted (``_quoting``)


@dataclass
class Candidate:
    chunk: Chunk
    score: float  # cosine similarity of the question to the chunk or, if closer, to one of its sentence windows
    fused: float
    ranks: dict[str, int]
    relevance: float | None = None
    flag: str = ""
    label: str = ""
    followed: bool = False  # holds a sentence the earlier turn a follow-up came from quoted (``retrieve``'s ``quoted``)

    @property
    def where(self) -> str:
        return self.chunk.location

    @property
    def text(self) -> str:
        return self.chunk.text

    def as_dict(self) -> dict:
        return {
            "id": self.label,
            "chunk_id": self.chunk.pk,
            "source": self.chunk.source.name,
            "title": self.chunk.source.title,
            "heading": self.chunk.heading,
            "page": self.chunk.page_start,
            "lines": [self.chunk.line_start, self.chunk.line_end],
            **location_fields(self.chunk),
            "score": round(self.score, 4),
            "fused": round(self.fused, 6),
            "ranks": self.ranks,
            "relevance": self.relevance,
            "flag": self.flag,
        }


@dataclass
class Retrieval:
    question: str
    mode: str
    hyde_text: str = ""
    channels: dict[str, list[Hit]] = field(default_factory=dict)
    candidates: list[Candidate] = field(default_factory=list)
    ranked: list[Candidate] = field(default_factory=list)  # the fused top_k before the gate (for evaluation)
    # retrieve() sets the gate's decision before it returns: no retrieval leaves without one.
    gate: GateDecision = field(init=False)
    conflicts: list[Conflict] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    quoted: tuple[str, ...] = ()  # ``retrieve``'s ``quoted``: what the answer a follow-up came from quoted

    def channels_dict(self) -> dict[str, list[list[float]]]:
        return {name: [[h.chunk_id, round(h.score, 6)] for h in hits] for name, hits in self.channels.items()}


class _Timer:
    def __init__(self, timings: dict[str, float]) -> None:
        self.timings = timings

    def __call__(self, stage: str) -> _Stage:
        return _Stage(self.timings, stage)


class _Stage:
    def __init__(self, timings: dict[str, float], stage: str) -> None:
        self.timings, self.stage = timings, stage

    def __enter__(self) -> None:
        self.start = time.perf_counter()

    def __exit__(self, *exc: object) -> None:
        self.timings[self.stage] = round((time.perf_counter() - self.start) * 1000, 1)


def embeddings_check(collection_ids: Sequence[int] | None = None) -> None:
    """Fail with the fix when the sources in scope cannot be searched with the configured embedding model:
    some were embedded with another model (``EmbeddingModelChanged``), or none was embedded yet."""
    model = settings.FOUNDRY.embedding.model
    stale = stale_embeddings(model=model, collection_ids=collection_ids)
    if stale:
        raise vectorstore.EmbeddingModelChanged(model, stale)
    if not vectorstore.table_exists(model):
        raise vectorstore.MissingEmbeddings(model)


def retrieve(
    *,
    question: str,
    collection_ids: Sequence[int] | None,
    mode: str | None = None,
    top_k: int | None = None,
    model_steps: bool = True,
    quoted: Sequence[str] = (),
) -> Retrieval:
    """Find evidence for ``question`` within ``collection_ids`` (None: every collection).

    ``model_steps=False`` skips every step that calls a language model (HyDE, relevance
    scoring, the LLM conflict check), whatever foundry.yaml says: a plain search (MCP ``search``).
    ``quoted``: the sentences the answer of the earlier turn a follow-up came from quoted. When the gate passed
    (on the question alone), the chunks in scope that hold one are ``followed`` candidates, after those found: "Are
    the stored measurements kept? (factory reset)" after "How do I do a factory reset?" reads the reset procedure
    that answered it ("… Stored measurements are deleted."), though its own words find the datasheet's overview.
    """
    conf = settings.FOUNDRY
    embeddings_check(collection_ids)
    result = Retrieval(question=question, mode=mode or conf.retrieval.mode, quoted=tuple(quoted))
    timer = _Timer(result.timings)
    top_k = top_k or conf.retrieval.top_k
    scorer_model = conf.retrieval.scorer_model if model_steps else "none"
    if model_steps and conf.retrieval.hyde and result.mode != "bm25":
        with timer("hyde"):
            result.hyde_text = hyde_generate(question)
    matrix = None
    if result.mode != "bm25" and conf.retrieval.dense_index == "matrix":
        start = time.perf_counter()
        matrix, built = dense.current(conf.embedding.model)
        if built:
            result.timings["dense_index_build"] = round((time.perf_counter() - start) * 1000, 1)
    texts = [question] + ([result.hyde_text] if result.hyde_text else [])
    with timer("search"):
        vectors, result.channels = _search(question, texts, result.mode, top_k, collection_ids, matrix, result.timings)
        if result.mode == "hybrid":
            fused = channels_fuse(result.channels, fusion=conf.retrieval.fusion, k=conf.retrieval.rrf_k)
            weight, overlap = recency()
            facts = chunk_facts([h.chunk_id for h in fused])
            fused = recency_boost(fused, facts, weight=weight, overlap=overlap, asked=word_set(question))[:top_k]
        else:
            fused = next(iter(result.channels.values()))[:top_k]
        # One vector: the dense channel searched with the question (not a HyDE text).
        result.candidates = _candidates(fused, result.channels, vectors[0], dense_by_question=len(vectors) == 1)
        result.ranked = list(result.candidates)
    result.gate = gate_decide(
        [c.score for c in result.candidates], min_score=conf.retrieval.min_score, min_chunks=conf.retrieval.min_chunks
    )
    if not result.gate.passed:
        result.candidates = []
        return result
    result.candidates = [c for c in result.candidates if c.score >= conf.retrieval.min_score]
    if scorer_model != "none":
        with timer("relevance"):
            _apply_relevance(result, scorer_model, conf.retrieval.relevance_threshold)
    if quoted:
        result.candidates += _quoting(quoted, result.candidates, vectors[0], collection_ids)
    for index, candidate in enumerate(result.candidates, start=1):
        candidate.label = f"S{index}"
    with timer("conflicts"):
        result.conflicts = conflicts_detect(passages(result.candidates), model=scorer_model)
    return result


def hyde_generate(question: str) -> str:
    """A short hypothetical answer, used only as the dense search query (D0006)."""
    reply = llm.complete(
        messages=[{"role": "user", "content": prompts.render("hyde", question=question)}],
        purpose="hyde",
        model=settings.FOUNDRY.retrieval.hyde_model,
        max_tokens=100,
    )
    return reply.text


def _search(
    question: str,
    texts: list[str],
    mode: str,
    top_k: int,
    collection_ids: Sequence[int] | None,
    matrix: dense_matrix.DenseMatrix | None,
    timings: dict[str, float],
) -> tuple[list[list[float]], dict]:
    """The query vectors and each channel's hits (``matrix``: the dense copy to scan, None for vec0).

    The two channels are independent, so the query embedding and the memory-mapped
    dense scan (torch and BLAS, which release the GIL and touch no database) run on a
    second thread while this one runs the BM25 query; the vec0 scan needs this
    thread's database connection and follows. The ``embed`` timing is the embedding alone.
    In hybrid mode the BM25 query leaves out common terms (``retrieval.bm25_max_df`` and
    ``retrieval.bm25_max_postings``): the dense channel still reads the whole question.
    """
    conf = settings.FOUNDRY
    depth = max(top_k * CANDIDATE_FACTOR, 50)

    def embed_and_scan() -> tuple[list[list[float]], list[Hit] | None]:
        start = time.perf_counter()
        vectors = llm.embed(texts, model=conf.embedding.model, kind="query")  # the question (and HyDE answer) searches
        timings["embed"] = round((time.perf_counter() - start) * 1000, 1)
        if matrix is None:
            return vectors, None
        big = matrix.ids.size > conf.retrieval.dense_exact_max_rows
        return vectors, matrix.search(
            vectors[-1], k=depth, collection_ids=collection_ids, shortlist=conf.retrieval.dense_shortlist if big else 0
        )

    channels: dict[str, list[Hit]] = {}
    with ThreadPoolExecutor(max_workers=1) as pool:
        pending = pool.submit(contextvars.copy_context().run, embed_and_scan)  # llm.record_calls counts it
        pruned = (
            {"max_df": conf.retrieval.bm25_max_df, "max_postings": conf.retrieval.bm25_max_postings}
            if mode == "hybrid"
            else {}
        )
        keyword = (
            ChunkSearch.search.keyword(question, limit=depth, collection_ids=collection_ids, **pruned)
            if mode in ("hybrid", "bm25")
            else None
        )
        vectors, scanned = pending.result()
    if mode in ("hybrid", "dense"):
        channels["dense"] = (
            scanned
            if scanned is not None  # embed_and_scan scanned the dense matrix
            else ChunkSearch.search.nearest(
                vectors[-1], model=conf.embedding.model, k=depth, collection_ids=collection_ids
            )
        )
    if keyword is not None:
        channels["bm25"] = keyword
    return vectors, channels


def channels_fuse(channels: dict[str, list[Hit]], *, fusion: str, k: int) -> list[Hit]:
    """RRF over chunks, or over documents (``retrieval.fusion: document``; see ``document_rank_fusion``)."""
    if fusion == "chunk":
        return reciprocal_rank_fusion(channels, k=k)
    ids = {h.chunk_id for hits in channels.values() for h in hits}
    source_of = dict(Chunk.objects.filter(pk__in=ids).values_list("pk", "source_id"))
    return document_rank_fusion(channels, source_of=source_of, k=k)


def chunk_facts(chunk_ids: Sequence[int]) -> ChunkFacts:
    """What ``recency_boost`` reads of each chunk: its source's date (``Source.dated``), its source, its words."""
    fields = ("pk", "source_id", "source__issued", "source__mtime", "text")
    dated, source_of, words = {}, {}, {}
    for pk, source_id, issued, mtime, text in Chunk.objects.filter(pk__in=chunk_ids).values_list(*fields):
        dated[pk] = (issued or mtime).timestamp() if (issued or mtime) else None
        source_of[pk], words[pk] = source_id, word_set(text)
    return ChunkFacts(dated, source_of, words)


@functools.cache
def fitted_recency() -> dict:
    """The recency weight and revision overlap ``bench/fit_recency.py`` fitted, with how
    (retrieval/data/recency.json)."""
    return json.loads((Path(__file__).resolve().parent.parent / "data" / "recency.json").read_text())


def recency() -> tuple[float, float]:
    """``retrieval.recency_weight`` and ``retrieval.revision_overlap`` from foundry.yaml, each else the fitted one."""
    conf = settings.FOUNDRY.retrieval
    weight = conf.recency_weight if conf.recency_weight is not None else float(fitted_recency()["weight"])
    overlap = conf.revision_overlap if conf.revision_overlap is not None else float(fitted_recency()["overlap"])
    return weight, overlap


def _candidates(
    fused: list[Hit], channels: dict[str, list[Hit]], question_vector: list[float], *, dense_by_question: bool
) -> list[Candidate]:
    """The fused chunks as candidates. A chunk's score is its cosine with the question or, when the dense
    channel searched with the question (``dense_by_question``), the better cosine of one of its sentence
    windows (that channel scores a chunk by its best vector), which names the one fact asked about where
    the whole chunk's vector is diluted by the rest."""
    ids = [h.chunk_id for h in fused]
    chunks = Chunk.objects.select_related("source").in_bulk(ids)
    sims = ChunkSearch.search.similarity(question_vector, ids, model=settings.FOUNDRY.embedding.model)
    ranks = {name: {h.chunk_id: rank for rank, h in enumerate(hits, start=1)} for name, hits in channels.items()}
    for h in channels.get("dense", []) if dense_by_question else []:
        sims[h.chunk_id] = max(sims.get(h.chunk_id, 0.0), h.score)
    return [
        Candidate(
            chunk=chunks[h.chunk_id],
            score=sims.get(h.chunk_id, 0.0),
            fused=h.score,
            ranks={name: r[h.chunk_id] for name, r in ranks.items() if h.chunk_id in r},
        )
        for h in fused
        if h.chunk_id in chunks
    ]


def _quoting(
    quoted: Sequence[str], found: list[Candidate], question_vector: list[float], collection_ids: Sequence[int] | None
) -> list[Candidate]:
    """Mark the ``found`` candidates that hold one of the ``quoted`` sentences (white space aside) as followed, and
    return the chunks in scope that hold one and were not found, as followed candidates scored by their cosine with
    the question, in the order of the sentences. A sentence is looked up by a keyword search for its words: it is
    verbatim chunk text, and its rarest words find it (the pruning of the hybrid keyword channel)."""
    sentences = list(dict.fromkeys(" ".join(q.split()) for q in quoted))
    conf = settings.FOUNDRY.retrieval
    pruned = {"max_df": conf.bm25_max_df, "max_postings": conf.bm25_max_postings}

    def holds(chunk: Chunk) -> bool:
        text = " ".join(chunk.text.split())
        return any(q in text for q in sentences)

    for candidate in found:
        candidate.followed = holds(candidate.chunk)
    seen = {c.chunk.pk for c in found}
    ids = [
        h.chunk_id
        for q in sentences
        for h in ChunkSearch.search.keyword(q, limit=QUOTE_HITS, collection_ids=collection_ids, **pruned)
        if h.chunk_id not in seen
    ]
    chunks = [c for c in Chunk.objects.select_related("source").in_bulk(ids).values() if holds(c)]
    model = settings.FOUNDRY.embedding.model
    sims = ChunkSearch.search.similarity(question_vector, [c.pk for c in chunks], model=model)
    chunks.sort(key=lambda c: ids.index(c.pk))
    return [Candidate(chunk=c, score=sims.get(c.pk, 0.0), fused=0.0, ranks={}, followed=True) for c in chunks]


def _apply_relevance(result: Retrieval, model: str, threshold: float) -> None:
    """Drop chunks scored below ``threshold``; an unscored chunk is kept and flagged."""
    scores = relevance_score(question=result.question, passages=[c.chunk.text for c in result.candidates], model=model)
    kept = []
    for candidate, relevance in zip(result.candidates, scores):
        candidate.relevance, candidate.flag = relevance.score, relevance.flag
        if relevance.score is None or relevance.score >= threshold:
            kept.append(candidate)
    result.candidates = kept


def passages(candidates: list[Candidate]) -> list[Passage]:
    return [
        Passage(
            c.label,
            c.chunk.source.name,
            c.where,
            c.chunk.text,
            chunk_id=c.chunk.pk,
            line_start=c.chunk.line_start,
            dated=c.chunk.source.dated.date().isoformat() if c.chunk.source.dated else "",
        )
        for c in candidates
    ]
