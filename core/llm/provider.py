"""litellm, set up once, with the ``local/`` provider registered: imported on the first call that needs it.

Importing litellm takes seconds of CPU (it loads every provider's client), more than an
answer from the local models does; a question answered by the extractive reader never
needs it. ``register_provider`` adds any other in-process provider (tests register
scripted models with it).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import litellm
from litellm import CustomLLM
from litellm.types.utils import ChatCompletionUsageBlock, EmbeddingResponse, GenericStreamingChunk, ModelResponse

from core.llm.local import LOCAL_REPEAT_PENALTY, _local

# ``retry._with_retries`` is the only retry loop, so every call passes max_retries=0 (calls._call_kwargs).
# litellm's OpenAI embedding path reads it as ``max_retries or litellm.DEFAULT_MAX_RETRIES``,
# which turns 0 into the SDK default of 2: three requests per attempt of ours, with the SDK's
# own unlogged sleeps (Retry-After included). With the default at 0, 0 means 0 there too.
litellm.DEFAULT_MAX_RETRIES = 0  # type: ignore[misc]  # Final in litellm, yet the only switch for it
litellm.suppress_debug_info = True
litellm.telemetry = False
# litellm logs every call at INFO on its own stderr handler; our own log line is enough.
for _name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "httpx"):
    logging.getLogger(_name).setLevel(logging.WARNING)


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
    """litellm provider ``local/``: llama.cpp chat models and the local embedders (``gateway.embed`` calls
    these directly; litellm reaches them here only when called on its own)."""

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
        vectors = _local.embedder(model).encode(list(input))
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
