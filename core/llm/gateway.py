"""Model calls: ``complete()`` (streamed when given ``on_text``), ``embed()``, ``count_tokens()``.

Each call goes through litellm with the retries and time limit of ``retry`` and
is counted by ``usage.record_calls()``; its failure is an ``LLMError``. The one
exception: a ``local/`` embedding model runs in this process and is called directly,
so embedding a question imports neither litellm nor its provider clients.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from core.llm.calls import _call_kwargs, _remote, _settings_llm
from core.llm.catalogue import EmbeddingKind, embedding_prefix
from core.llm.errors import LLMError, ModelUnavailable
from core.llm.local import _local
from core.llm.usage import Completion, _cost, _recorder

if TYPE_CHECKING:
    from types import ModuleType

logger = logging.getLogger(__name__)


def _litellm() -> ModuleType:
    """litellm, set up and with the ``local/`` provider registered (imported on the first call that needs it)."""
    from core.llm.provider import litellm

    return litellm


def complete(
    *,
    messages: list[dict[str, str]],
    purpose: str,
    model: str,
    max_tokens: int = 256,
    temperature: float = 0.0,
    on_text: Callable[[str], None] | None = None,
) -> Completion:
    """One chat completion with retries; raises LLMError, never returns an empty text.

    ``on_text``: the reply is streamed, and ``on_text`` is given the whole text written so far each time
    it grows (the caller decides what, if anything, to show of it). Once text has been given out a failure
    is final (LLMError, no retry), so nothing given out is ever written twice.
    """
    if model == "none":
        raise ModelUnavailable(f"no model is configured for {purpose}", model=model)
    from core.llm.retry import _with_retries, _within

    litellm = _litellm()
    conf = _settings_llm()

    def call() -> Any:
        if on_text is not None:
            response = _streamed(
                model=model, messages=messages, max_tokens=max_tokens, temperature=temperature, on_text=on_text
            )
        else:
            response = litellm.completion(
                model=model, messages=messages, max_tokens=max_tokens, temperature=temperature, **_call_kwargs(model)
            )
        choices = getattr(response, "choices", None) or []
        message = getattr(choices[0], "message", None) if choices else None
        text = (getattr(message, "content", None) or "").strip()
        if not text:
            raise litellm.InternalServerError(
                message="empty completion" if choices else "a reply without choices", llm_provider="", model=model
            )
        return response, text

    attempt = (lambda: _within(call, seconds=conf.timeout_s, model=model)) if _remote(model) else call
    response, text = _with_retries(attempt, model=model, retries=conf.retries, what=purpose)
    usage = getattr(response, "usage", None)
    prompt_tokens = getattr(usage, "prompt_tokens", 0) or 0
    completion_tokens = getattr(usage, "completion_tokens", 0) or 0
    cost = _cost(response, model)
    record = _recorder.get()
    if record is not None:
        record.completions.append((purpose, model))
        record.prompt_tokens += prompt_tokens
        record.completion_tokens += completion_tokens
        record.cost += cost
    logger.info(
        "llm %s model=%s prompt_tokens=%s completion_tokens=%s", purpose, model, prompt_tokens, completion_tokens
    )
    return Completion(
        text=text, model=model, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens, cost=cost
    )


def _streamed(
    *, model: str, messages: list[dict[str, str]], max_tokens: int, temperature: float, on_text: Callable[[str], None]
) -> Any:
    """A streamed completion put back together (litellm's ``stream_chunk_builder``: text and usage)."""
    litellm = _litellm()
    chunks: list[Any] = []
    written = ""
    try:
        stream = litellm.completion(
            model=model,
            messages=messages,
            max_tokens=max_tokens,
            temperature=temperature,
            stream=True,
            stream_options={"include_usage": True},
            **_call_kwargs(model),
        )
        for chunk in stream:
            chunks.append(chunk)
            choices = getattr(chunk, "choices", None) or []
            delta = getattr(getattr(choices[0], "delta", None), "content", None) if choices else None
            if delta:
                written += delta
                on_text(written)
    except Exception as exc:
        if written:  # part of the reply is out: a retry could write different text
            raise LLMError(f"the streamed reply of {model} broke off: {exc}", model=model) from exc
        raise
    return litellm.stream_chunk_builder(chunks, messages=messages)


def embed(texts: list[str], *, model: str, batch_size: int = 64, kind: EmbeddingKind = "passage") -> list[list[float]]:
    """Embed ``texts`` in batches; vectors come back L2-normalised and in input order.

    ``kind``: "query" for questions (and what is searched like one), "passage" for what is searched
    for (chunks, windows, sentences). Models trained with prefixes get them here, and only here
    (``catalogue.embedding_prefix``: e5's ``query: `` / ``passage: ``); for the others both kinds are one.
    A ``local/`` model embeds in this process. Any other: each batch makes at most ``llm.retries`` + 1
    requests (the SDK adds none), and a remote request is bounded by ``llm.timeout_s`` as a whole.
    Raises LLMError.
    """
    if not texts:
        return []
    prefix = embedding_prefix(model, kind)
    if prefix:
        texts = [prefix + text for text in texts]
    # Sent shortest first: a batch is padded to its longest text, so batches of texts of similar
    # length cost far less than mixed ones (ingest: 55 % -> 99 % of the raw encode rate on
    # table-heavy files; the reader's units: ~3x faster in batches of 16; docs/decisions.md).
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    ordered = [texts[i] for i in order]
    batches = [ordered[start : start + batch_size] for start in range(0, len(ordered), batch_size)]
    if model.partition("/")[0] == "local":  # the embedder batches itself, and sees the whole call's size
        found = _local_embedding(ordered, model=model, batch_size=batch_size)
    else:
        found = [vector for batch in batches for vector in _provider_embedding(batch, model=model)]
    vectors = [_normalise(vector) for vector in found]
    record = _recorder.get()
    if record is not None:
        record.embedding_calls += len(batches)
    in_order: list[list[float]] = [[] for _ in texts]
    for position, index in enumerate(order):
        in_order[index] = vectors[position]
    return in_order


def _local_embedding(texts: list[str], *, model: str, batch_size: int) -> list[list[float]]:
    """``texts`` through a ``local/`` embedder, in this process, in batches of ``batch_size``: nothing to retry,
    no time limit."""
    try:
        embedder = _local.embedder(model.partition("/")[2])
        return [vector.tolist() for vector in embedder.encode(texts, batch_size=batch_size)]
    except LLMError:  # ModelUnavailable: an unknown name, weights not installed
        raise
    except Exception as exc:  # a local model failing is no transient fault: asking again gets the same
        raise LLMError(f"embedding with {model} failed: {exc}", model=model) from exc


def _provider_embedding(batch: list[str], *, model: str) -> list[list[float]]:
    """One batch through litellm, with the retries and time limit of ``retry``."""
    from core.llm.retry import _with_retries, _within

    litellm = _litellm()
    conf = _settings_llm()

    def call() -> Any:
        return litellm.embedding(model=model, input=batch, **_call_kwargs(model))

    # As for completions: llm.timeout_s bounds a remote call as a whole, not each read.
    attempt = (lambda: _within(call, seconds=conf.timeout_s, model=model)) if _remote(model) else call
    response = _with_retries(attempt, model=model, retries=conf.retries, what="embedding")
    return [item["embedding"] for item in sorted(response.data, key=lambda item: item["index"])]


def _normalise(vector: list[float]) -> list[float]:
    norm = sum(v * v for v in vector) ** 0.5
    return [v / norm for v in vector] if norm else list(vector)


def count_tokens(text: str, *, model: str) -> int:
    """Tokens ``text`` takes for ``model`` (litellm's provider-aware counter)."""
    return _litellm().token_counter(model=model, text=text)
