"""A fault-injecting OpenAI-compatible HTTP server for tests (``FaultProvider``) and its behaviours.

Each behaviour answers one ``POST /v1/chat/completions`` (or ``/v1/embeddings``): a grounded reply, an
HTTP error with headers, a stall, a trickle, an empty completion, a body that is
not JSON, a body cut short, or the request forwarded to a real upstream server.
"""

from __future__ import annotations

import hashlib
import json
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.generation.conftest import echo_reply


PURPOSES = (
    ("relevance", "Rate how relevant each passage is"),
    ("conflicts", "state contradictory values"),
    ("generate", "Write the document in Markdown"),
    ("answer", "<context>"),
)


def purpose_of(body: dict) -> str:
    """Which Foundry prompt a request carries, read from its messages; "embedding" for an embedding request."""
    if "input" in body and "messages" not in body:
        return "embedding"
    text = "\n".join(str(m.get("content", "")) for m in body.get("messages", []))
    return next((name for name, marker in PURPOSES if marker in text), "other")


def completion_body(text: str, model: str = "fault-llm") -> bytes:
    return json.dumps(
        {
            "id": "chatcmpl-fault",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
        }
    ).encode()


EMBEDDING_DIMENSION = 8


def embedding_vector(text: str) -> list[float]:
    """A fixed vector per text (from its SHA-256), so equal texts embed equally."""
    digest = hashlib.sha256(text.encode()).digest()
    return [byte / 255.0 - 0.5 for byte in digest[:EMBEDDING_DIMENSION]]


def embedding_body(inputs: list[str] | str, model: str = "fault-embed") -> bytes:
    texts = [inputs] if isinstance(inputs, str) else inputs
    return json.dumps(
        {
            "object": "list",
            "model": model,
            "data": [
                {"object": "embedding", "index": i, "embedding": embedding_vector(str(t))} for i, t in enumerate(texts)
            ],
            "usage": {"prompt_tokens": 5 * len(texts), "total_tokens": 5 * len(texts)},
        }
    ).encode()


Behaviour = Callable[["FaultHandler", dict], None]


@dataclass
class FaultProvider:
    """An OpenAI-compatible server on a random loopback port whose replies are scripted per request."""

    upstream: str | None = None  # base URL (…/v1) that ``forward`` sends healthy requests to
    default: Behaviour | None = None
    queue: list[Behaviour] = field(default_factory=list)
    requests: list[dict] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.default = self.default or grounded
        provider = self

        class Handler(FaultHandler):
            owner = provider

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def script(self, *behaviours: Behaviour, then: Behaviour | None = None) -> None:
        """Answer the next requests with ``behaviours`` in order, and every later one with ``then``."""
        with self.lock:
            self.queue = list(behaviours)
            if then is not None:
                self.default = then

    def next_behaviour(self, body: dict) -> Behaviour:
        with self.lock:
            self.requests.append(body)
            return self.queue.pop(0) if self.queue else self.default  # type: ignore[return-value]

    def count(self, purpose: str | None = None) -> int:
        return sum(1 for body in self.requests if purpose is None or purpose_of(body) == purpose)

    def close(self) -> None:
        self.release.set()  # wake every stalled handler
        self.server.shutdown()
        self.server.server_close()


class FaultHandler(BaseHTTPRequestHandler):
    owner: FaultProvider
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # keep the test output clean
        return None

    def do_GET(self) -> None:  # /v1/models: what a client may probe
        self.send_json(200, {"object": "list", "data": [{"id": "fault-llm", "object": "model"}]})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {"unparsed": raw.decode("utf-8", "replace")}
        self.owner.headers.append({k.lower(): v for k, v in self.headers.items()})
        behaviour = self.owner.next_behaviour(body)
        try:
            behaviour(self, body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout): nothing left to send

    def send_raw(
        self,
        status: int,
        payload: bytes,
        *,
        content_type: str = "application/json",
        headers: dict[str, str] | None = None,
        length: int | None = None,
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload) if length is None else length))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(payload)
        self.wfile.flush()

    def send_json(self, status: int, payload: dict, headers: dict[str, str] | None = None) -> None:
        self.send_raw(status, json.dumps(payload).encode(), headers=headers)


# Behaviours: each answers one request.


def grounded(handler: FaultHandler, body: dict) -> None:
    """A healthy reply: an answer or document that copies cited sentences from its context, or embeddings."""
    purpose = purpose_of(body)
    if purpose == "embedding":
        handler.send_raw(200, embedding_body(body["input"]))
        return
    if purpose == "relevance":
        count = body["messages"][0]["content"].count("[S")
        text = "\n".join(f"S{i}: 8" for i in range(1, count + 1))
    elif purpose == "conflicts":
        text = "NONE"
    else:
        text = echo_reply(body["messages"])
        if purpose == "generate":
            text = "# Sensor bus\n\n" + text
    handler.send_raw(200, completion_body(text))


def reply(text: str) -> Behaviour:
    return lambda handler, body: handler.send_raw(200, completion_body(text))


def status(code: int, headers: dict[str, str] | None = None) -> Behaviour:
    def behaviour(handler: FaultHandler, body: dict) -> None:
        handler.send_json(
            code, {"error": {"message": f"fault injected: HTTP {code}", "type": "fault", "code": str(code)}}, headers
        )

    return behaviour


def stall(seconds: float) -> Behaviour:
    """Say nothing for ``seconds`` (longer than llm.timeout_s), then answer into a closed socket."""

    def behaviour(handler: FaultHandler, body: dict) -> None:
        handler.owner.release.wait(seconds)
        grounded(handler, body)

    return behaviour


def trickle(seconds: float, *, every: float = 0.2) -> Behaviour:
    """Send the headers, then one byte of the body every ``every`` s (each read within llm.timeout_s)."""

    def behaviour(handler: FaultHandler, body: dict) -> None:
        payload = completion_body("Up to 8 sensors can be connected to the RS-485 bus.")
        handler.send_raw(200, b"", length=len(payload))
        deadline = time.monotonic() + seconds
        for index in range(len(payload)):
            if time.monotonic() > deadline or handler.owner.release.wait(every):
                break
            try:
                handler.wfile.write(payload[index : index + 1])
                handler.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                return  # the client hung up before the reply was complete

    return behaviour


def not_json(handler: FaultHandler, body: dict) -> None:
    """HTTP 200 whose body is a proxy's HTML error page, not the JSON the API promises."""
    handler.send_raw(200, b"<html><body>502 Bad Gateway</body></html>", content_type="application/json")


def cut(handler: FaultHandler, body: dict) -> None:
    """HTTP 200 announcing more bytes than it sends, then the connection closes."""
    payload = completion_body("Up to 8 sensors can be connected to the RS-485 bus.")
    handler.send_raw(200, payload[:40], length=len(payload) + 500)
    handler.close_connection = True
    handler.connection.shutdown(socket.SHUT_RDWR)


def forward(handler: FaultHandler, body: dict) -> None:
    """Pass the request to the real upstream server and its reply back unchanged."""
    request = urllib.request.Request(
        handler.owner.upstream + "/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=300) as response:
            handler.send_raw(response.status, response.read())
    except urllib.error.HTTPError as exc:
        handler.send_raw(exc.code, exc.read())
    except (urllib.error.URLError, ConnectionError) as exc:  # the upstream died: say so, as a gateway would
        handler.send_json(
            502, {"error": {"message": f"upstream {handler.owner.upstream} failed: {exc}", "type": "upstream"}}
        )
