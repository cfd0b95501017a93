"""Optional LLM enrichment at ingest (contextual prefixes, D0004; source summaries, D0008)
and the sizing rules that keep every embedded text within the embedder's input limit."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace

from django.conf import settings

from core import llm, prompts
from core.config import EXTRACTIVE
from core.grounding import Grounder
from core.units import passage_units
from sources.models import titled_path
from sources.services.chunking import ChunkDraft

# Room kept for the heading/title line and the LLM prefix in front of each chunk.
CONTEXT_RESERVE = 40
DOCUMENT_EXCERPT_CHARS = 6000
SUMMARY_EXCERPT_CHARS = 2 * DOCUMENT_EXCERPT_CHARS

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ChunkSizing:
    count: Callable[[str], int]
    max_chunk_tokens: int
    input_limit: int | None

    @classmethod
    def for_model(cls, model: str, chunk_tokens: int) -> ChunkSizing:
        local_count = llm.embedding_token_counter(model)
        if local_count is not None:
            count = local_count
        else:

            def count(text: str) -> int:
                return llm.count_tokens(text, model=model)

        limit = llm.embedding_input_limit(model)
        # Two places are taken by the [CLS]/[SEP] markers of BERT-style embedders.
        ceiling = (limit - 2 - CONTEXT_RESERVE) if limit else chunk_tokens
        return cls(count=count, max_chunk_tokens=max(16, min(chunk_tokens, ceiling)), input_limit=limit)

    def context_for(self, title: str, draft: ChunkDraft, prefix: str) -> str:
        """What is embedded in front of the chunk: title/heading line and LLM prefix, trimmed to fit."""
        head = titled_path(title, list(draft.heading))
        context = f"{head}\n{prefix}".strip() if prefix else head
        if self.input_limit is None:
            return context
        room = self.input_limit - 2 - draft.token_count - 2
        words = context.split(" ")
        while words and self.count(" ".join(words)) > room:
            words = words[: max(0, len(words) - max(1, len(words) // 8))]
        return " ".join(words)


def context_prefixes(*, title: str, document: str, drafts: list[ChunkDraft]) -> list[str]:
    """One situating sentence per chunk from ``embedding.context_model``; empty when it is ``none``."""
    model = settings.FOUNDRY.embedding.context_model
    if model == "none":
        return [""] * len(drafts)
    excerpt = document[:DOCUMENT_EXCERPT_CHARS]
    out = []
    for draft in drafts:
        prompt = prompts.render("context_prefix", title=title, document=excerpt, chunk=draft.text)
        reply = llm.complete(
            messages=[{"role": "user", "content": prompt}], purpose="context_prefix", model=model, max_tokens=60
        )
        out.append(" ".join(reply.text.split()))
    return out


def source_summary(
    *, title: str, drafts: list[ChunkDraft], chunk_vectors: list[list[float]] | None = None
) -> llm.Completion | None:
    """A global summary of the source from ``ingest.summary_model``, holding only what the source supports.

    The generation prompt hands summaries to the model as background from the sources, so a
    summary gets the grounding check an answer gets: each sentence must be supported by a
    chunk the summariser read, numbers included, or it is left out. None when the model is
    ``none`` or none of its sentences is supported.
    """
    conf = settings.FOUNDRY.ingest
    if conf.summary_model == "none":
        return None
    if conf.summary_model == EXTRACTIVE:
        return extractive_summary(drafts=drafts, chunk_vectors=chunk_vectors, max_tokens=conf.summary_max_tokens)
    read, size = [], 0
    for draft in drafts:  # the chunks that fit in the summariser's excerpt
        if size >= SUMMARY_EXCERPT_CHARS:
            break
        read.append(draft.text)
        size += len(draft.text) + 2
    document = "\n\n".join(read)[:SUMMARY_EXCERPT_CHARS]
    prompt = prompts.render(
        "summary", title=title, document=document, max_words=max(20, conf.summary_max_tokens * 3 // 4)
    )
    reply = llm.complete(
        messages=[{"role": "user", "content": prompt}],
        purpose="summary",
        model=conf.summary_model,
        max_tokens=conf.summary_max_tokens,
    )
    grounded = Grounder({f"S{i}": text for i, text in enumerate(read, start=1)}).ground(reply.text)
    kept = " ".join(s.text for s in grounded.sentences if s.supported_by)
    logger.info("source summary: %s of %s sentences supported", grounded.supported, grounded.total)
    return replace(reply, text=kept) if kept else None


SUMMARY_SENTENCES = 5


def extractive_summary(
    *, drafts: list[ChunkDraft], chunk_vectors: list[list[float]] | None, max_tokens: int
) -> llm.Completion | None:
    """The source's lead sentence and its most central ones, verbatim, in source order (no LLM).

    Central: closest to the centroid of the source's chunk vectors (the whole source), among the
    sentences of the excerpt an LLM summariser would read. At most SUMMARY_SENTENCES sentences and
    about ``max_tokens`` tokens (4 tokens for 3 words).
    """
    units, size = [], 0
    for draft in drafts:
        if size >= SUMMARY_EXCERPT_CHARS:
            break
        units += [u.text for u in passage_units(draft.text) if u.kind == "sentence" and len(u.text.split()) >= 4]
        size += len(draft.text) + 2
    if not units:
        return None
    model = settings.FOUNDRY.embedding.model
    vectors = llm.embed(units, model=model)
    centroid = [sum(column) / len(column) for column in zip(*(chunk_vectors or vectors))]
    central = sorted(range(1, len(units)), key=lambda i: -sum(a * b for a, b in zip(vectors[i], centroid)))
    chosen, words = [0], len(units[0].split())
    for i in central:
        if len(chosen) >= SUMMARY_SENTENCES or words + len(units[i].split()) > max_tokens * 3 // 4:
            break
        chosen.append(i)
        words += len(units[i].split())
    text = " ".join(dict.fromkeys(units[i] for i in sorted(chosen)))
    return llm.Completion(text=text, model=EXTRACTIVE, prompt_tokens=0, completion_tokens=0, cost=0.0)
