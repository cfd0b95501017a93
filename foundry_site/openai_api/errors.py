"""Errors in the OpenAI API's shape: ``{"error": {"message", "type", "param", "code"}}`` and the matching status.

Clients such as the ``openai`` SDK, Open WebUI and LibreChat read this shape and map the status to their own
exceptions (401 AuthenticationError, 404 NotFoundError, 400 BadRequestError, 429 RateLimitError).
"""

from __future__ import annotations

from django.http import JsonResponse


class OpenAIError(Exception):
    """A request the API refuses; ``status`` is the HTTP status, ``param`` the request field at fault."""

    def __init__(
        self,
        message: str,
        *,
        status: int = 400,
        type: str = "invalid_request_error",
        code: str | None = None,
        param: str | None = None,
        retry_after: int | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.type = type
        self.code = code
        self.param = param
        self.retry_after = retry_after


def invalid(message: str, *, param: str | None, code: str | None = None) -> OpenAIError:
    """400 for a request field that is missing or wrong; the message names the field."""
    return OpenAIError(message, status=400, param=param, code=code)


def error_response(exc: OpenAIError) -> JsonResponse:
    body = {"error": {"message": str(exc), "type": exc.type, "param": exc.param, "code": exc.code}}
    response = JsonResponse(body, status=exc.status)
    if exc.status == 401:
        response["WWW-Authenticate"] = 'Bearer realm="foundry"'
    if exc.retry_after is not None:
        response["Retry-After"] = str(exc.retry_after)
    return response
