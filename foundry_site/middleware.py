"""Request-size limits, answered with 413 (and the limit) instead of a bare 400 page.

Django refuses a body over ``DATA_UPLOAD_MAX_MEMORY_SIZE`` only when something
reads it, and then with a bare 400 page (``RequestDataTooBig`` is a
SuspiciousOperation), as it does for too many form fields. A client that sent
too much must learn that with 413 and the limit, an API client as JSON.
Checking ``Content-Length`` up front also spares the server from reading a body
it will refuse anyway.
"""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent
from django.http import HttpRequest, HttpResponse, JsonResponse

MIB = 1024 * 1024
API_PREFIX = "/api/"


def body_limit(request: HttpRequest) -> int | None:
    """The largest body accepted for ``request`` in bytes, or None for no limit.

    A multipart body may carry one uploaded file up to ``ingest.max_file_mb``
    plus ordinary form fields (bounded by DATA_UPLOAD_MAX_MEMORY_SIZE); every
    other body is bounded by DATA_UPLOAD_MAX_MEMORY_SIZE alone.
    """
    fields = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    if request.content_type == "multipart/form-data":
        return int(settings.FOUNDRY.ingest.max_file_mb * MIB) + (fields or 0)
    return fields


def content_length(request: HttpRequest) -> int:
    # The same reading as Django's WSGIRequest: a missing or malformed header counts as 0.
    try:
        return max(0, int(request.META.get("CONTENT_LENGTH") or 0))
    except (TypeError, ValueError):
        return 0


def error_response(request: HttpRequest, detail: str, *, status: int) -> HttpResponse:
    """JSON ``{"detail": …}`` under /api/, plain text for pages."""
    if request.path.startswith(API_PREFIX):
        return JsonResponse({"detail": detail}, status=status)
    return HttpResponse(f"{detail}\n", status=status, content_type="text/plain; charset=utf-8")


def too_large(request: HttpRequest, *, length: int | None, limit: int) -> HttpResponse:
    """413 naming the limit."""
    size = f"is {length} bytes" if length is not None else "has a form field larger than allowed"
    return error_response(
        request,
        f"The request body {size}; the limit is {limit} bytes ({limit / MIB:.1f} MB). Send less data in one request.",
        status=413,
    )


class RequestSizeLimitMiddleware:
    """Answer 413 when the declared body is larger than ``body_limit``."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        limit = body_limit(request)
        length = content_length(request)
        if limit is not None and length > limit:
            return too_large(request, length=length, limit=limit)
        if request.method == "POST" and request.content_type == "multipart/form-data":
            refused = _parse_form(request)
            if refused is not None:
                return refused
        return self.get_response(request)


def _parse_form(request: HttpRequest) -> HttpResponse | None:
    """Parse a multipart body now, so its field limits answer clearly.

    Parsing is what CsrfViewMiddleware (or the API view) would do next anyway; the
    result is kept on the request. Files are streamed to disk as usual.
    """
    try:
        request.POST  # noqa: B018  (the property parses the body)
    except RequestDataTooBig:
        return too_large(request, length=None, limit=settings.DATA_UPLOAD_MAX_MEMORY_SIZE)
    except (TooManyFieldsSent, TooManyFilesSent) as exc:
        what = "files" if isinstance(exc, TooManyFilesSent) else "fields"
        limit = settings.DATA_UPLOAD_MAX_NUMBER_FILES if what == "files" else settings.DATA_UPLOAD_MAX_NUMBER_FIELDS
        return error_response(request, f"Too many form {what}: at most {limit} per request.", status=400)
    return None


class ApiJsonErrorsMiddleware:
    """Under /api/, a 404 for a path no endpoint has, or a 405 for a method it does not take, is JSON
    ``{"detail": …}`` like every other API error (Django and django-ninja answer these with a page or text)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if (
            not request.path.startswith(API_PREFIX)
            or response.status_code not in (404, 405)
            or response.get("Content-Type", "").startswith("application/json")
        ):
            return response
        if response.status_code == 404:
            return error_response(request, f"No API endpoint at {request.path}.", status=404)
        allowed = response.get("Allow", "")
        refused = error_response(
            request, f"{request.method} is not allowed on {request.path}; use {allowed}.", status=405
        )
        refused["Allow"] = allowed
        return refused
