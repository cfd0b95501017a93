"""Per-user rate limit for the query endpoints (``FOUNDRY_QUERY_RATE`` per minute).

A fixed one-minute window counted in Django's cache. The cache must be shared
by every server process (the default file cache under FOUNDRY_HOME/cache is),
otherwise each gunicorn worker would allow the full rate on its own.
"""

from __future__ import annotations

import math
import time

from django.conf import settings
from django.core.cache import cache

WINDOW_SECONDS = 60


class RateLimited(Exception):
    """Too many queries this minute; ``retry_after`` is the wait in seconds (the API answers 429)."""

    def __init__(self, retry_after: int) -> None:
        super().__init__(
            f"Too many queries: at most {settings.FOUNDRY_QUERY_RATE} a minute. Try again in {retry_after} s."
        )
        self.retry_after = retry_after


def rate_limit_check(user_id: int, *, rate: int | None = None, now: float | None = None) -> int | None:
    """Count one request of ``user_id``; return the seconds to wait if over the limit, else None.

    ``rate`` defaults to ``settings.FOUNDRY_QUERY_RATE``; a rate of 0 turns the limit off.
    """
    rate = settings.FOUNDRY_QUERY_RATE if rate is None else rate
    if rate <= 0:
        return None
    now = time.time() if now is None else now
    window = int(now // WINDOW_SECONDS)
    key = f"foundry:rate:{user_id}:{window}"
    # add() is a no-op when the key exists, so concurrent first requests do not reset the count.
    cache.add(key, 0, timeout=WINDOW_SECONDS * 2)
    try:
        count = cache.incr(key)
    except ValueError:  # the key expired between add() and incr()
        cache.set(key, 1, timeout=WINDOW_SECONDS * 2)
        count = 1
    if count <= rate:
        return None
    return max(1, math.ceil((window + 1) * WINDOW_SECONDS - now))


def rate_limit_enforce(user_id: int) -> None:
    """Count one request of ``user_id``; raise ``RateLimited`` when over the limit."""
    wait = rate_limit_check(user_id)
    if wait is not None:
        raise RateLimited(wait)
