"""``foundry tokens create USER [--name N]`` and ``foundry tokens revoke ID``."""

from __future__ import annotations

import argparse
from datetime import datetime
from typing import TextIO

from foundry_site.models import ApiToken
from foundry_site.services.tokens import token_create, token_revoke


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("tokens", help="API tokens for the JSON API")
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    c = actions.add_parser("create", help="create a token for USER and print it once")
    c.add_argument("username", metavar="USER")
    c.add_argument("--name", default="", help="what the token is for, e.g. the client's name")
    c.set_defaults(handler=create_command)
    r = actions.add_parser("revoke", help="revoke the token with this id")
    r.add_argument("token_id", metavar="ID", type=int)
    r.set_defaults(handler=revoke_command)
    ls = actions.add_parser("list", help="list tokens (never the tokens themselves)")
    ls.set_defaults(handler=list_command)


def create_command(opts: argparse.Namespace, out: TextIO) -> int:
    new = token_create(username=opts.username, name=opts.name)
    out.write(
        f"Created API token {new.token.pk} for {new.token.user.get_username()}"
        f"{f' ({new.token.name})' if new.token.name else ''}.\n"
    )
    out.write("Copy it now; it is not stored and cannot be shown again:\n\n")
    out.write(f"{new.plain}\n\n")
    out.write("Use it as:  Authorization: Bearer <token>\n")
    return 0


def revoke_command(opts: argparse.Namespace, out: TextIO) -> int:
    token = token_revoke(token_id=opts.token_id)
    out.write(f"Revoked API token {token.pk} ({token.prefix}…) of {token.user.get_username()}.\n")
    return 0


def list_command(opts: argparse.Namespace, out: TextIO) -> int:
    out.write(f"  {'id':>4}  {'user':<16} {'name':<20} {'token':<12} {'created':<16} {'last used':<16} revoked\n")
    for t in ApiToken.objects.select_related("user").order_by("pk"):

        def when(value: datetime | None) -> str:
            return value.strftime("%Y-%m-%d %H:%M") if value else "-"

        out.write(
            f"  {t.pk:>4}  {t.user.get_username():<16} {t.name[:20]:<20} {t.prefix + '…':<12} "
            f"{when(t.created_at):<16} {when(t.last_used_at):<16} {when(t.revoked_at)}\n"
        )
    return 0
