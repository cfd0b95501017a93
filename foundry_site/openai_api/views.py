"""``GET /v1/models``, ``GET /v1/models/<id>`` and ``POST /v1/chat/completions``: OpenAI's API over Foundry.

Bearer tokens only (``foundry tokens create``), as for ``/mcp``: a browser never sends one on its own, so
there is no CSRF to check, and a request without one is 401 in OpenAI's error shape, never the login page.

Streaming: one ``chat.completion.chunk`` per verified sentence, each sent as soon as it has passed its
check (the extractive reader's verbatim quotes as soon as they are chosen; a model's sentences once
grounded), never raw model tokens; then the Sources list and the ``foundry`` object. The first chunk (the
assistant role) goes out at once so a client sees the response start while Foundry works. The streamed
content equals the non-streamed one.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Callable, Iterator
from functools import wraps
from typing import TYPE_CHECKING, Any, cast

from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse, HttpResponseBase, JsonResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt

from core import llm
from core.requests import ApiRequest
from foundry_site.openai_api.chat import (
    ChatRequest,
    Prepared,
    chat_answer,
    chat_prepare,
    chat_request_parse,
    model_ids,
    model_scope,
)
from foundry_site.openai_api.errors import OpenAIError, error_response, invalid
from foundry_site.openai_api.present import LiveNumbers, chunk, chunk_events, completion_body, reply_build
from foundry_site.services.tokens import bearer_authenticate
from generation.answers import QueryError, QueryFailed
from generation.streaming import run_streamed
from sources.vectorstore import MissingEmbeddings

if TYPE_CHECKING:
    from django.contrib.auth.models import User

logger = logging.getLogger(__name__)
CHUNK_PATH = "sources/{source_id}/chunks/{chunk_id}"  # under /api/v1/: the chunk endpoint of the API
View = Callable[..., HttpResponseBase]


def openai_view(methods: tuple[str, ...]) -> Callable[[View], View]:
    """Bearer authentication, the allowed methods, and every OpenAIError as OpenAI's error shape."""

    def decorate(view: View) -> View:
        @csrf_exempt
        @login_not_required
        @wraps(view)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
            try:
                if request.method not in methods:
                    raise OpenAIError(
                        f"Use {' or '.join(methods)} for this endpoint.", status=405, code="method_not_allowed"
                    )
                authed = cast(ApiRequest, request)
                authed.auth = _bearer_user(request)
                return view(authed, *args, **kwargs)
            except OpenAIError as exc:
                response = error_response(exc)
                if exc.status == 405:
                    response["Allow"] = ", ".join(methods)
                return response

        return wrapper

    return decorate


def _bearer_user(request: HttpRequest) -> User:
    user, refused = bearer_authenticate(request.headers.get("Authorization", ""))
    if user is None:
        raise OpenAIError(refused, status=401, code="invalid_api_key")
    return user


@openai_view(("GET",))
def models(request: ApiRequest) -> HttpResponse:
    return JsonResponse({"object": "list", "data": [_model(mid, text) for mid, text in model_ids(request.auth)]})


@openai_view(("GET",))
def model_detail(request: ApiRequest, model: str) -> HttpResponse:
    model_scope(request.auth, model)  # 404 unless the caller may use it
    return JsonResponse(_model(model, dict(model_ids(request.auth))[model]))


@openai_view(("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"))
def unknown(request: ApiRequest, path: str) -> HttpResponse:
    """Any other path under /v1/: OpenAI's 404 for an invalid URL, in its error shape (not the HTML page)."""
    raise OpenAIError(
        f"Invalid URL ({request.method} /v1/{path}): Foundry serves /v1/models and /v1/chat/completions.",
        status=404,
        code="unknown_url",
    )


def _model(model_id: str, description: str) -> dict[str, Any]:
    return {"id": model_id, "object": "model", "created": 0, "owned_by": "foundry", "description": description}


@openai_view(("POST",))
def chat_completions(request: ApiRequest) -> HttpResponse | StreamingHttpResponse:
    chat = chat_request_parse(request.body)
    prepared = chat_prepare(user=request.auth, chat=chat)
    completion_id = f"chatcmpl-{uuid.uuid4().hex}"
    if chat.stream:
        response = StreamingHttpResponse(
            _events(request, chat, prepared, completion_id), content_type="text/event-stream"
        )
        response["Cache-Control"] = "no-cache"
        response["X-Accel-Buffering"] = "no"
        return response
    try:
        answered = chat_answer(user=request.auth, prepared=prepared)
    except Exception as exc:  # re-raised unless it is a known answering failure
        raise _answer_error(exc) from exc
    reply = reply_build(
        answered.answer,
        query_id=answered.query_id,
        condensed=answered.condensed,
        chunk_url=request.build_absolute_uri("/api/v1/") + CHUNK_PATH,
        site_url=request.build_absolute_uri("/").rstrip("/"),
    )
    return JsonResponse(completion_body(reply, completion_id=completion_id, model=chat.model))


def _events(request: ApiRequest, chat: ChatRequest, prepared: Prepared, completion_id: str) -> Iterator[str]:
    created = int(time.time())
    yield _sse(chunk(completion_id, chat.model, created, {"role": "assistant", "content": ""}))
    numbers = LiveNumbers()
    for event in run_streamed(
        lambda emit: chat_answer(user=request.auth, prepared=prepared, on_sentence=lambda text: emit("sentence", text))
    ):
        if event.kind == "keepalive":
            yield ": keep-alive\n\n"
        elif event.kind == "sentence":
            yield _sse(chunk(completion_id, chat.model, created, {"content": numbers.piece(event.value)}))
        elif event.kind == "error":  # the status line is sent: an error event, as OpenAI's stream does
            error = _stream_error(event.value)
            yield _sse({"error": {"message": str(error), "type": error.type, "param": error.param, "code": error.code}})
            return
        elif event.kind == "done":
            answered = event.value
            reply = reply_build(
                answered.answer,
                query_id=answered.query_id,
                condensed=answered.condensed,
                chunk_url=request.build_absolute_uri("/api/v1/") + CHUNK_PATH,
                site_url=request.build_absolute_uri("/").rstrip("/"),
            )
            for data in chunk_events(
                reply,
                completion_id=completion_id,
                model=chat.model,
                created=created,
                include_usage=chat.include_usage,
                sentences=numbers.rest(reply),
            ):
                yield _sse(data)
    yield "data: [DONE]\n\n"


def _stream_error(exc: BaseException) -> OpenAIError:
    """A failure while streaming as an OpenAIError; an unexpected one is logged and named as a server error."""
    try:
        return _answer_error(exc)
    except Exception:
        logger.error("streamed chat completion failed", exc_info=exc)
        return OpenAIError(
            "The answer failed unexpectedly; the error is in the server log.",
            status=500,
            type="server_error",
            code="server_error",
        )


def _answer_error(exc: BaseException) -> OpenAIError:
    """A failure while answering as an OpenAIError; anything unexpected is re-raised (a 500 and a traceback)."""
    if isinstance(exc, QueryError):
        return invalid(str(exc), param="messages")
    if isinstance(exc, (QueryFailed, MissingEmbeddings, llm.ModelUnavailable)):
        return OpenAIError(str(exc), status=503, type="server_error", code="service_unavailable")
    if isinstance(exc, llm.LLMError):
        return OpenAIError(str(exc), status=503 if exc.transient else 502, type="server_error", code="model_error")
    raise exc


def _sse(data: dict[str, Any]) -> str:
    return f"data: {json.dumps(data, ensure_ascii=False)}\n\n"
