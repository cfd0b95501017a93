"""What a generated document is made from: an approved feature spec (as text), the topic, source summaries
and the passages retrieved for the topic, assembled into the generation prompt.

The spec arrives as text (``SpecText``): ``generation`` does not import ``specs``
(dependency direction), the caller resolves which approved spec applies. Runs that
write the document are ``generation.pipeline``'s.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings

from core import llm, prompts
from core.config import EXTRACTIVE
from core.text import TextRejected, user_text
from generation.context import chunk_budget, context_build, fence_escape
from retrieval.services.retrieve import Candidate, Retrieval, retrieve
from sources.models import SourceSummary


@dataclass(frozen=True)
class SpecText:
    name: str
    version: int
    body: str


@dataclass
class Prepared:
    retrieval: Retrieval
    included: list[Candidate]
    system: str


class GenerationError(Exception):
    """A run cannot proceed; the message is shown to the user and stored on the run."""


MAX_TOPIC_CHARS = 1000


def topic_clean(topic: str) -> str:
    """The topic with NULs made spaces and outer whitespace stripped; GenerationError when unusable.

    The same limit as the web form and the API (1000 characters) holds for the CLI.
    """
    try:
        return user_text(topic, what="topic", max_chars=MAX_TOPIC_CHARS, collapse=False)
    except TextRejected as exc:
        raise GenerationError(str(exc)) from None


def topic_request(topic: str) -> str:
    """The user message of a generation call: the topic, then the task once more, after the passages.

    Given only "Topic: …", SmolLM2-135M continued the ``<context>`` block it had just read instead
    of writing (0 of the 5 sample documents of ``bench/generate_docs.py`` on an AVX-512 EPYC host);
    with the task restated last, 4 of 5 (docs/benchmarks.md, "Document generation").
    """
    return (
        f"Topic: {topic}\n\nWrite the document about this topic now, in Markdown, using only sentences "
        "from the passages, each followed by its passage id like [S1]."
    )


def document_prepare(*, topic: str, spec: SpecText, collection_ids: list[int] | None) -> Prepared:
    """Retrieval and the assembled system prompt; makes no generation call (used by --dry-run)."""
    conf = settings.FOUNDRY
    topic = topic_clean(topic)
    retrieval = retrieve(question=topic, collection_ids=collection_ids)
    if not retrieval.gate.passed or not retrieval.candidates:
        return Prepared(retrieval, [], "")
    if conf.generation.model == EXTRACTIVE:  # the writer quotes; there is no prompt (generation.writer)
        return Prepared(retrieval, retrieval.candidates, "")
    summaries = _summaries(retrieval.candidates, conf.generation.max_source_summaries)
    frame = dict(
        feature_spec_content=spec.body,
        max_source_summaries=conf.generation.max_source_summaries,
        source_summaries=summaries or "(none)",
    )
    model = conf.generation.model
    overhead = llm.count_tokens(prompts.render("generate_system", retrieved_chunks="", **frame) + topic, model=model)
    budget = chunk_budget(
        model=model, configured=conf.generation.token_budget, reserved=overhead + conf.generation.max_document_tokens
    )
    built = context_build(retrieval.candidates[: conf.generation.max_passages * 2], model=model, budget=budget)
    return Prepared(retrieval, built.included, prompts.render("generate_system", retrieved_chunks=built.text, **frame))


def _summaries(candidates: list[Candidate], limit: int) -> str:
    """Summaries of the retrieved chunks' sources, best-ranked source first, at most ``limit``."""
    order = list(dict.fromkeys(c.chunk.source_id for c in candidates))[:limit]
    found = {s.source_id: s for s in SourceSummary.objects.filter(source_id__in=order).select_related("source")}
    # Summaries are model output about document text, so they may carry its injections too.
    return "\n".join(
        fence_escape(f"- {found[sid].source.name}: {' '.join(found[sid].text.split())}")
        for sid in order
        if sid in found
    )
