"""``foundry mcp``: the MCP server over stdio, for a local agent that starts it as a subprocess.

The server acts as one user for its whole life: ``--as USER``, else the API token in
``FOUNDRY_TOKEN``. stdout carries the protocol, so nothing else may be printed there.
"""

from __future__ import annotations

import argparse
import os
from typing import Any, TextIO

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError

from foundry_site.services.tokens import token_authenticate

TOKEN_VARIABLE = "FOUNDRY_TOKEN"


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("mcp", help="run the MCP server over stdio (for an agent that starts it as a subprocess)")
    p.add_argument(
        "--as",
        dest="as_user",
        metavar="USER",
        default=None,
        help=f"act as this user (default: the owner of the API token in ${TOKEN_VARIABLE})",
    )
    p.set_defaults(handler=mcp_command)


def stdio_user(as_user: str | None, token: str | None) -> Any:
    """The user the server acts as; CommandError when neither names an active user."""
    if as_user:
        user = get_user_model().objects.filter(username=as_user, is_active=True).first()
        if user is None:
            raise CommandError(f"no active user named {as_user!r}")
        return user
    if not token:
        raise CommandError(
            f"say who the MCP server acts as: set {TOKEN_VARIABLE} to an API token "
            "(foundry tokens create USER) or pass --as USER"
        )
    user = token_authenticate(token.strip())
    if user is None:
        raise CommandError(f"{TOKEN_VARIABLE} is not a valid API token (unknown, revoked, or its user is inactive)")
    return user


def mcp_command(opts: argparse.Namespace, out: TextIO) -> int:
    # Imported here: every `foundry` command loads this module to add its parser, and the MCP SDK
    # takes seconds of CPU to import, which only this command needs.
    import anyio

    from foundry_site.mcp.server import ACTING_USER, foundry_server

    ACTING_USER.set(stdio_user(opts.as_user, os.environ.get(TOKEN_VARIABLE)))
    # The request thread's connection was only used to find the user; tool calls run on worker threads.
    from django.db import connections

    connections.close_all()
    anyio.run(foundry_server().run_stdio_async)
    return 0
