"""How a model call is attempted: which errors are retried, the backoff between attempts, the time limit.

``_with_retries`` is the only retry loop (every provider SDK is asked for none), so
``llm.retries`` bounds the requests sent and every wait is chosen, and logged, here.
"""

from __future__ import annotations

import contextvars
import datetime
import email.utils
import logging
import math
import queue
import threading
import time
from typing import Any

import openai  # litellm's own dependency: the base of its errors

from core.llm.errors import LLMError, ModelUnavailable
from core.llm.provider import litellm

logger = logging.getLogger(__name__)

MAX_BACKOFF_S = 60.0

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
        value = headers.get("retry-after") if headers is not None and hasattr(headers, "get") else None
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
