"""``foundry sync``: durations, the foreground loop, and sync.interval in foundry.yaml."""

from __future__ import annotations

import argparse

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import CommandError, call_command

from foundry_site.cli.sync import duration, sync_loop
from core.config import parse_config, parse_duration


@pytest.mark.parametrize(
    "text, seconds", [("30s", 30), ("10m", 600), ("1h", 3600), ("1.5h", 5400), ("2d", 172800), (" 5 m ", 300)]
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    "text, why",
    [
        ("10", "expected a number and a unit"),
        ("10x", "expected a number and a unit"),
        ("", "expected a number and a unit"),
        ("-5m", "expected a number and a unit"),
        ("m", "expected a number and a unit"),
        ("0s", "at least 1 second"),
        ("0.5s", "at least 1 second"),
    ],
)
def test_bad_durations_are_refused_with_the_reason(text: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        parse_duration(text)
    with pytest.raises(argparse.ArgumentTypeError, match=f"invalid duration {text!r}"):
        duration(text)


@pytest.mark.django_db
def test_every_with_a_bad_duration_stops_before_syncing() -> None:
    with pytest.raises(CommandError, match=r"argument --every: invalid duration '10 minutes': expected a number"):
        call_command("foundry", "sync", "--every", "10 minutes")


def test_sync_interval_in_foundry_yaml() -> None:
    assert parse_config({}).sync.interval_seconds == 600
    assert parse_config({"sync": {"interval": "30s"}}).sync.interval_seconds == 30
    assert parse_config({"sync": {"interval": "off"}}).sync.interval_seconds is None
    with pytest.raises(ImproperlyConfigured, match="sync.interval: invalid value 'often'"):
        parse_config({"sync": {"interval": "often"}})


def test_the_loop_runs_a_round_then_waits_the_rest_of_the_interval() -> None:
    now = [0.0]
    took = iter([100.0, 700.0, 5.0])  # the second round takes longer than the interval
    waits: list[float] = []

    def one_round() -> int:
        now[0] += next(took)
        return 0

    def sleep(seconds: float) -> None:
        waits.append(seconds)
        now[0] += seconds
        if len(waits) == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        sync_loop(one_round, every=600, sleep=sleep, clock=lambda: now[0])
    assert waits == [500.0, 0.0, 595.0]
