"""The one NinjaAPI, mounted at /api/v1/. Each app contributes a Router from its api.py.

Every operation needs authentication by default: an ``Authorization: Bearer``
token (``foundry tokens create``) or the signed-in browser session (CSRF is
enforced for unsafe methods). The docs at /api/v1/docs and /api/v1/openapi.json take
either as well (a bearer token, or a signed-in user).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, ValidationError

from core import llm
from foundry_site.auth import BearerTokenAuth, SessionCsrfAuth
from core.ratelimit import RateLimited
from foundry_site.services.tokens import GET_TOKEN, NEEDS_TOKEN, bearer_authenticate
from generation.answers import QueryError, QueryFailed
from generation.asking import ConversationNotFound
from generation.api import router as generation_router
from generation.documents import GenerationError
from generation.querylog.api import router as querylog_router
from generation.querylog.feedback import FeedbackError
from sources.api import router as sources_router
from sources.services.uploads import UploadRejected
from sources.vectorstore import MissingEmbeddings
from specs.api import generate_router, router as specs_router
from specs.errors import SpecError


# /api/v1 also takes the browser's session, so a caller with no credentials is told both ways in.
NEEDS_AUTH = (
    f"Authentication required: send Authorization: Bearer <token> ({GET_TOKEN}), "
    "or call from a browser signed in to Foundry."
)


def unauthorized(response: HttpResponse) -> HttpResponse:
    response["WWW-Authenticate"] = 'Bearer realm="foundry"'
    return response


def docs_access(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """The docs page and openapi.json: for a bearer token (as every API call), else a signed-in session."""
    session_view = login_required(view)

    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        authorization = request.headers.get("Authorization", "")
        if authorization.partition(" ")[0].lower() != "bearer":
            return session_view(request, *args, **kwargs)
        user, refused = bearer_authenticate(authorization)
        if user is None:
            return unauthorized(JsonResponse({"detail": refused}, status=401))
        request.user = user
        return view(request, *args, **kwargs)

    return wrapper


_DETAIL = {"type": "object", "properties": {"detail": {"type": "string"}}, "required": ["detail"]}
_FIELD_ERRORS = {
    "type": "object",
    "properties": {"detail": {"type": "array", "items": {"type": "object"}}},
    "required": ["detail"],
}
_UNSAFE = ("post", "put", "patch", "delete")


def _error(description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


class FoundryAPI(NinjaAPI):
    """The NinjaAPI whose schema also lists the errors its handlers answer for every operation: a client (or a
    schema-driven fuzzer) reads 401 from any operation, 403 (CSRF) from any change, 422 from any input, 404 from any
    lookup, and 400 or 409 from any body, not only where a view declared them."""

    def get_openapi_schema(self, *args: Any, **kwargs: Any) -> Any:
        schema = super().get_openapi_schema(*args, **kwargs)
        for operations in schema["paths"].values():
            for method, operation in operations.items():
                responses = operation["responses"]
                declared = {int(code) for code in responses}
                for code, description, body in _handler_errors(method, operation):
                    if code not in declared:
                        responses[code] = _error(description, body)
        return schema


def _handler_errors(method: str, operation: dict[str, Any]) -> list[tuple[int, str, dict[str, Any]]]:
    """The errors the API's authentication and exception handlers may answer for an operation of this shape."""
    errors = [(401, "No valid bearer token or session", _DETAIL)]
    if method in _UNSAFE:
        errors.append((403, "A session without its CSRF token, or not allowed", _DETAIL))
    if operation.get("parameters") or operation.get("requestBody"):
        errors.append((404, "Not found, or not readable by the caller", _DETAIL))
        errors.append((422, "A parameter or field that does not validate", _FIELD_ERRORS))
    if operation.get("requestBody"):
        errors += [(400, "Input that cannot be used", _DETAIL), (409, "In a state that does not allow it", _DETAIL)]
    return errors


api = FoundryAPI(
    title="Foundry API",
    version="1",
    urls_namespace="api",
    auth=[BearerTokenAuth(), SessionCsrfAuth()],
    docs_decorator=docs_access,
)


def field_location(loc: list[Any]) -> list[Any]:
    """``["body", "body", "question"]`` → ``["body", "question"]``: django-ninja puts the view's
    argument name between the part of the request and the field; clients need the field once."""
    if len(loc) >= 3 and loc[0] == "body":
        return [loc[0], *loc[2:]]
    return list(loc)


@api.exception_handler(AuthenticationError)
def authentication_failed(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
    """Neither a valid bearer token nor a signed-in session: say which, and what was wrong with the token."""
    refused = bearer_authenticate(request.headers.get("Authorization", ""))[1]
    if refused in ("", NEEDS_TOKEN):  # no token sent (or a session without one that failed): both ways in
        refused = NEEDS_AUTH
    return unauthorized(api.create_response(request, {"detail": refused}, status=401))


@api.exception_handler(ValidationError)
def validation_failed(request: HttpRequest, exc: ValidationError) -> HttpResponse:
    errors = [{**error, "loc": field_location(list(error.get("loc", [])))} for error in exc.errors]
    return api.create_response(request, {"detail": errors}, status=422)


@api.exception_handler(llm.ModelUnavailable)
def model_unavailable(request: HttpRequest, exc: llm.ModelUnavailable) -> HttpResponse:
    return api.create_response(request, {"detail": str(exc)}, status=503)


@api.exception_handler(llm.LLMError)
def model_failed(request: HttpRequest, exc: llm.LLMError) -> HttpResponse:
    return api.create_response(request, {"detail": str(exc)}, status=503 if exc.transient else 502)


@api.exception_handler(UploadRejected)
def upload_rejected(request: HttpRequest, exc: UploadRejected) -> HttpResponse:
    # 400 bad type or content, 409 name exists, 413 too large.
    return api.create_response(request, {"detail": str(exc)}, status=exc.status_code)


@api.exception_handler(SpecError)
def spec_error(request: HttpRequest, exc: SpecError) -> HttpResponse:
    # Each spec error class carries its status: 400 bad input or selection, 403, 404, 409 state.
    return api.create_response(request, {"detail": str(exc)}, status=exc.status_code)


@api.exception_handler(RateLimited)
def rate_limited(request: HttpRequest, exc: RateLimited) -> HttpResponse:
    response = api.create_response(request, {"detail": str(exc)}, status=429)
    response["Retry-After"] = str(exc.retry_after)
    return response


@api.exception_handler(QueryError)
@api.exception_handler(FeedbackError)
@api.exception_handler(GenerationError)
def bad_input(request: HttpRequest, exc: Exception) -> HttpResponse:
    # An unusable question (empty, too long), feedback or topic.
    return api.create_response(request, {"detail": str(exc)}, status=400)


@api.exception_handler(ConversationNotFound)
def conversation_not_found(request: HttpRequest, exc: ConversationNotFound) -> HttpResponse:
    # Someone else's conversation id answers exactly like one that was never made.
    return api.create_response(request, {"detail": str(exc)}, status=404)


@api.exception_handler(QueryFailed)
@api.exception_handler(MissingEmbeddings)
def query_unavailable(request: HttpRequest, exc: Exception) -> HttpResponse:
    # The model failed for good (already in the query log), or nothing is embedded yet.
    return api.create_response(request, {"detail": str(exc)}, status=503)


# Routers are mounted here: sources, the query log, queries and generation runs, specs.
api.add_router("/", sources_router)
api.add_router("/", querylog_router)
api.add_router("/", generation_router)
api.add_router("/", generate_router)
api.add_router("/specs", specs_router)
