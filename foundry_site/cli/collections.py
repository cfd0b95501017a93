"""``foundry collections list|create|grant|revoke|bind|unbind``: who may read which sources, and the folders
that ``foundry sync`` keeps them in step with."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TextIO

from django.db.models import Count

from foundry_site.cli.display import safe
from sources.models import Collection
from sources.services.collections import collection_create, collection_grant, collection_revoke
from sources.services.sync import collection_bind, collection_unbind, sync_summary


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("collections", help="collections and their readers")
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    actions.add_parser("list", help="collections with their sources and readers").set_defaults(handler=list_command)
    c = actions.add_parser("create", help="create a collection")
    c.add_argument("name", metavar="NAME")
    c.add_argument("--description", default="")
    c.add_argument("--public", action="store_true", help="readable by every signed-in user")
    c.set_defaults(handler=create_command)
    for action, verb in (("grant", "let USER read"), ("revoke", "stop USER reading")):
        a = actions.add_parser(action, help=f"{verb} COLLECTION")
        a.add_argument("collection", metavar="COLLECTION")
        a.add_argument("username", metavar="USER")
        a.set_defaults(handler=grant_command if action == "grant" else revoke_command)
    b = actions.add_parser("bind", help="bind COLLECTION to FOLDER: `foundry sync` keeps its sources in step")
    b.add_argument("collection", metavar="COLLECTION")
    b.add_argument("folder", metavar="FOLDER")
    b.set_defaults(handler=bind_command)
    u = actions.add_parser("unbind", help="stop syncing COLLECTION's folder (its sources stay)")
    u.add_argument("collection", metavar="COLLECTION")
    u.set_defaults(handler=unbind_command)


def list_command(opts: argparse.Namespace, out: TextIO) -> int:
    rows = Collection.objects.annotate(n=Count("sources")).prefetch_related("readers").order_by("name")
    out.write(f"  {'collection':<20} {'public':<6} {'sources':>7}  {'readers':<20}  folder\n")
    for c in rows:
        readers = ", ".join(sorted(u.get_username() for u in c.readers.all())) or "-"
        folder = f"{safe(c.folder)}  ({safe(sync_summary(c))})" if c.folder else "-"
        out.write(f"  {c.name:<20} {'yes' if c.public else 'no':<6} {c.n:>7}  {readers:<20}  {folder}\n")
    return 0


def create_command(opts: argparse.Namespace, out: TextIO) -> int:
    coll = collection_create(name=opts.name, description=opts.description, public=opts.public)
    out.write(f"Created collection {coll.name}{' (public)' if coll.public else ''}.\n")
    return 0


def grant_command(opts: argparse.Namespace, out: TextIO) -> int:
    changed = collection_grant(collection=opts.collection, username=opts.username)
    state = "can now read" if changed else "could already read"
    out.write(f"{opts.username} {state} collection {opts.collection}.\n")
    return 0


def revoke_command(opts: argparse.Namespace, out: TextIO) -> int:
    changed = collection_revoke(collection=opts.collection, username=opts.username)
    state = "can no longer read" if changed else "was not a reader of"
    out.write(f"{opts.username} {state} collection {opts.collection}.\n")
    return 0


def bind_command(opts: argparse.Namespace, out: TextIO) -> int:
    coll = collection_bind(collection=opts.collection, folder=Path(opts.folder))
    out.write(
        f"Collection {coll.name} is bound to {safe(coll.folder)}: `foundry sync` ingests its changes and "
        "removes sources whose file is gone.\n"
    )
    return 0


def unbind_command(opts: argparse.Namespace, out: TextIO) -> int:
    coll = collection_unbind(collection=opts.collection)
    out.write(f"Collection {coll.name} is no longer bound to a folder; its sources stay.\n")
    return 0
