"""``/mcp``: the SDK's Streamable HTTP transport inside the WSGI app (gunicorn, ``foundry serve``).

The SDK's transport is an ASGI app; gunicorn runs WSGI. In stateless JSON-response mode
(no session between requests, one JSON body per POST, no SSE stream held open) each HTTP
request is a self-contained ASGI exchange, so this view runs it on a short-lived event loop
in the request's own thread: a fresh session manager per request (a manager runs once), the
request body handed over in one piece, the response collected and returned as a Django
``HttpResponse``. Nothing outlives the request, so gunicorn's workers, threads and timeouts
work as for every other view. Only POST is served: GET (a server-to-client stream) and DELETE
(ending a session) have nothing to do without sessions and are answered 405.

Authentication is the API's: ``Authorization: Bearer <token>`` (``foundry tokens create``);
no token, or a revoked one, is 401 before the SDK sees the request. Django's ALLOWED_HOSTS
checks the Host header, so the SDK's own DNS-rebinding check is not repeated.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from dataclasses import dataclass, field
from typing import Any

import anyio
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from foundry_site.mcp.server import ACTING_USER, foundry_server
from foundry_site.services.tokens import bearer_authenticate

# Hop-by-hop and length headers are WSGI's business, not the app's.
DROPPED_HEADERS = {"connection", "content-length", "transfer-encoding", "keep-alive"}


@dataclass
class AsgiReply:
    status: int = 500
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytearray = field(default_factory=bytearray)


@csrf_exempt  # bearer tokens only: a browser never sends one on its own, so there is no CSRF to check
@login_not_required  # answers 401 itself, like the API
def mcp_endpoint(request: HttpRequest) -> HttpResponse:
    user, refused = bearer_authenticate(request.headers.get("Authorization", ""))
    if user is None:
        response: HttpResponse = JsonResponse({"detail": refused}, status=401)
        response["WWW-Authenticate"] = 'Bearer realm="foundry"'
        return response
    if request.method != "POST":
        # A stateless server has no stream to open (GET) and no session to end (DELETE); the spec's answer
        # is 405. (Passed to the SDK, a GET would open an event stream that never ends.)
        response = JsonResponse(
            {"detail": "This MCP endpoint is stateless: send JSON-RPC messages with POST."}, status=405
        )
        response["Allow"] = "POST"
        return response
    reply = asgi_exchange(asgi_scope(request), request.body, user=user)
    response = HttpResponse(bytes(reply.body), status=reply.status)
    for name, value in reply.headers:
        if name.lower() not in DROPPED_HEADERS:
            response[name] = value
    return response


def asgi_scope(request: HttpRequest) -> dict[str, Any]:
    """The ASGI HTTP scope of a WSGI request (headers lower-cased, as ASGI requires)."""
    headers = [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in request.headers.items()]
    port = int(request.get_port() or 80)
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": request.method,
        "scheme": request.scheme,
        "path": request.path,
        "raw_path": request.path.encode("utf-8"),
        "root_path": "",
        "query_string": request.META.get("QUERY_STRING", "").encode("latin-1"),
        "headers": headers,
        "client": (request.META.get("REMOTE_ADDR", ""), 0),
        "server": (request.get_host().split(":")[0], port),
    }


def asgi_exchange(scope: dict[str, Any], body: bytes, *, user: Any) -> AsgiReply:
    """Run one request through the SDK's stateless JSON-response transport, acting as ``user``."""
    token = ACTING_USER.set(user)
    try:
        return anyio.run(_exchange, scope, body)
    finally:
        ACTING_USER.reset(token)


async def _exchange(scope: dict[str, Any], body: bytes) -> AsgiReply:
    reply = AsgiReply()
    done = anyio.Event()
    delivered = False

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await done.wait()  # the client "disconnects" only once the response is complete
        return {"type": "http.disconnect"}

    async def send(message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.start":
            reply.status = message["status"]
            reply.headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in message.get("headers", [])]
        elif message["type"] == "http.response.body":
            reply.body += message.get("body", b"")
            if not message.get("more_body", False):
                done.set()

    manager = StreamableHTTPSessionManager(app=foundry_server().lowlevel, stateless=True, json_response=True)
    async with manager.run():
        await manager.handle_request(scope, receive, send)
    done.set()
    return reply
