"""``foundry mcp``: who the stdio server acts as (the server itself runs in test_mcp_live.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from foundry_site.cli.mcp_server import stdio_user
from foundry_site.services.tokens import token_create, token_revoke

pytestmark = pytest.mark.django_db


def test_the_token_names_the_user(make_user: Callable[..., Any]) -> None:
    alice = make_user("alice")
    assert stdio_user(None, token_create(username="alice").plain) == alice
    assert stdio_user("alice", None) == alice


def test_as_user_wins_over_the_token(make_user: Callable[..., Any]) -> None:
    make_user("alice")
    bob = make_user("bob")
    assert stdio_user("bob", token_create(username="alice").plain) == bob


@pytest.mark.parametrize(
    ("as_user", "token", "message"),
    [
        (None, None, "set FOUNDRY_TOKEN to an API token .* or pass --as USER"),
        (None, "fdy_forged", "FOUNDRY_TOKEN is not a valid API token"),
        ("nobody", None, "no active user named 'nobody'"),
        ("inactive", None, "no active user named 'inactive'"),
    ],
)
def test_no_usable_user_is_refused(
    make_user: Callable[..., Any], as_user: str | None, token: str | None, message: str
) -> None:
    inactive = make_user("inactive")
    inactive.is_active = False
    inactive.save()
    with pytest.raises(CommandError, match=message):
        stdio_user(as_user, token)


def test_a_revoked_token_is_refused(make_user: Callable[..., Any]) -> None:
    make_user("alice")
    new = token_create(username="alice")
    token_revoke(token_id=new.token.pk)
    with pytest.raises(CommandError, match="not a valid API token"):
        stdio_user(None, new.plain)


def test_the_command_refuses_before_serving(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FOUNDRY_TOKEN", raising=False)
    with pytest.raises(CommandError, match="FOUNDRY_TOKEN"):
        call_command("foundry", "mcp")
