from __future__ import annotations

from typing import Any

from core.ratelimit import rate_limit_check

T0 = 1_000_000_040.0  # 20 s into a minute window (1_000_000_020 is a multiple of 60)


def test_allows_rate_then_says_how_long_to_wait(settings: Any) -> None:
    settings.FOUNDRY_QUERY_RATE = 3
    assert [rate_limit_check(1, now=T0 + i) for i in range(3)] == [None, None, None]
    assert rate_limit_check(1, now=T0 + 5) == 35  # the window ends 40 s after T0


def test_users_are_counted_separately(settings: Any) -> None:
    settings.FOUNDRY_QUERY_RATE = 1
    assert rate_limit_check(1, now=T0) is None
    assert rate_limit_check(2, now=T0) is None
    assert rate_limit_check(1, now=T0) is not None


def test_next_window_starts_fresh() -> None:
    assert rate_limit_check(7, rate=1, now=T0) is None
    assert rate_limit_check(7, rate=1, now=T0 + 1) is not None
    assert rate_limit_check(7, rate=1, now=T0 + 40) is None


def test_default_is_ten_per_minute_and_zero_turns_it_off(settings: Any) -> None:
    from django.conf import settings as live

    assert isinstance(live.FOUNDRY_QUERY_RATE, int)
    settings.FOUNDRY_QUERY_RATE = 10
    results = [rate_limit_check(3, now=T0) for _ in range(11)]
    assert results[:10] == [None] * 10 and results[10] is not None
    assert all(rate_limit_check(4, rate=0, now=T0) is None for _ in range(50))


def test_works_on_the_shared_file_cache(settings: Any, tmp_path: Any) -> None:
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
            "LOCATION": str(tmp_path / "cache"),
        }
    }
    assert rate_limit_check(5, rate=1, now=T0) is None
    assert rate_limit_check(5, rate=1, now=T0) == 40
