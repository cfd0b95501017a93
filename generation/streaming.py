"""Running an answer in a worker thread while the request streams what it reports.

The ask page's stream and ``/v1/chat/completions`` with ``stream: true`` both answer in a thread of their
own and send, as they happen, the stages and the sentences that passed their check (``answer_question``'s
``progress`` and ``on_sentence``), then the result.

The worker uses the request's own database connection, lent to it for the while: the request thread only
waits on the queue until the work is done, so the two never use it at the same time, and the work sees
exactly what the request sees (in tests, the test's open transaction too).
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections

logger = logging.getLogger(__name__)

KEEPALIVE_SECONDS = 15
Emit = Callable[[str, Any], None]


@dataclass(frozen=True)
class Event:
    """``kind``: what the work emitted (e.g. ``stage``, ``sentence``), or ``keepalive``, ``done`` (``value``
    is the work's result) or ``error`` (``value`` is the exception)."""

    kind: str
    value: Any = None


def run_streamed(work: Callable[[Emit], Any], *, keepalive: float = KEEPALIVE_SECONDS) -> Iterator[Event]:
    """Run ``work(emit)`` in a thread and yield each ``emit(kind, value)`` as an Event as soon as it is made,
    a ``keepalive`` Event after ``keepalive`` quiet seconds, and last ``done`` or ``error``.

    An exception of the work ends the stream as an ``error`` event carrying it (logged when it is not one of
    the caller's expected errors: the caller decides what the asker is told).
    """
    events: queue.Queue[Event] = queue.Queue()
    connection = connections[DEFAULT_DB_ALIAS]
    connection.inc_thread_sharing()

    def target() -> None:
        connections[DEFAULT_DB_ALIAS] = connection
        try:
            events.put(Event("done", work(lambda kind, value: events.put(Event(kind, value)))))
        except Exception as exc:  # handed to the request thread, which reports it
            events.put(Event("error", exc))
        finally:
            connection.dec_thread_sharing()

    threading.Thread(target=target, daemon=True).start()
    finished = False
    try:
        while not finished:
            try:
                event = events.get(timeout=keepalive)
            except queue.Empty:
                yield Event("keepalive")
                continue
            finished = event.kind in ("done", "error")
            yield event
    finally:
        # A client that goes away must not end the request (and close the lent connection) under the
        # work: wait for it, so the answer is still logged whole.
        while not finished:
            finished = events.get().kind in ("done", "error")
