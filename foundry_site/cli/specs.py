"""``foundry specs list|show|import|submit|approve|reject|archive``: the spec workflow on the command line.

Every write names the acting user with ``--as USER``: the CLI runs with the database's
rights, so it cannot know who is typing, and the same permission and four-eyes checks as
in the admin apply to the user named.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError

from specs import selectors, services
from specs.errors import SpecError
from specs.models import FeatureSpec, SpecVersion

if TYPE_CHECKING:
    from django.contrib.auth.models import User

Command = Callable[[argparse.Namespace, TextIO], int]


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("specs", help="feature specs and their approval workflow")
    specs = p.add_subparsers(dest="specs_command", required=True, metavar="ACTION")

    ls = specs.add_parser("list", help="every spec with its latest and approved version")
    ls.add_argument("--approved", action="store_true", help="only specs generation can use")
    ls.set_defaults(handler=list_command)

    show = specs.add_parser("show", help="a spec's versions, decision history and body")
    show.add_argument("name")
    show.add_argument("--version", type=int, default=None, help="body of this version (default: latest)")
    show.set_defaults(handler=show_command)

    imp = specs.add_parser("import", help="create or update a spec from a Markdown file")
    imp.add_argument("file", type=Path)
    imp.add_argument("--name", default=None, help="spec name (default: front matter 'name:' or the file stem)")
    _acting_user(imp)
    imp.set_defaults(handler=import_command)

    for action, text in (
        ("submit", "put the draft up for review"),
        ("approve", "approve the version in review (needs specs.approve_featurespec)"),
        ("reject", "reject the version in review (needs specs.approve_featurespec)"),
        ("archive", "retire the approved version (needs specs.approve_featurespec)"),
    ):
        q = specs.add_parser(action, help=text)
        q.add_argument("name")
        if action != "submit":
            q.add_argument(
                "--note", default="", help="reason, kept in the history" + (" (required)" if action == "reject" else "")
            )
        _acting_user(q)
        q.set_defaults(handler=transition_command, specs_action=action)


def _acting_user(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--as", dest="as_user", metavar="USER", default=None, help="username of the person taking this step (required)"
    )


def _user(opts: argparse.Namespace) -> User:
    if not opts.as_user:
        raise CommandError(
            f"`foundry specs {opts.specs_command}` needs --as USER: the user taking this step, "
            "so the history records who did it and permissions can be checked."
        )
    try:
        return get_user_model().objects.get_by_natural_key(opts.as_user)
    except get_user_model().DoesNotExist:
        raise CommandError(
            f"No user named '{opts.as_user}'. Create one with `python manage.py createsuperuser` or in the admin."
        ) from None


def _spec_errors(func: Command) -> Command:
    """Domain errors become a CommandError: one clear line, exit status 1."""

    def wrapper(opts: argparse.Namespace, out: TextIO) -> int:
        try:
            return func(opts, out)
        except SpecError as exc:
            raise CommandError(str(exc)) from None

    return wrapper


def _status(version: SpecVersion | None) -> str:
    return f"v{version.number} {version.status}" if version else "-"


@_spec_errors
def list_command(opts: argparse.Namespace, out: TextIO) -> int:
    specs = list(selectors.spec_list())
    if opts.approved:
        specs = [s for s in specs if _approved(s)]
    if not specs:
        out.write("No feature specs. Import one with `foundry specs import FILE.md --as USER`.\n")
        return 0
    out.write(f"  {'name':<24} {'latest':<14} {'approved':<10} title\n")
    for spec in specs:
        versions = list(spec.versions.all())  # prefetched, newest first
        approved = _approved(spec)
        out.write(
            f"  {spec.name:<24} {_status(versions[0]):<14} "
            f"{('v' + str(approved.number)) if approved else '-':<10} {spec.title}\n"
        )
    return 0


def _approved(spec: FeatureSpec) -> SpecVersion | None:
    return next((v for v in spec.versions.all() if v.status == "approved"), None)


@_spec_errors
def show_command(opts: argparse.Namespace, out: TextIO) -> int:
    spec = selectors.spec_get(name=opts.name)
    versions = list(spec.versions.order_by("-number"))
    chosen = next((v for v in versions if v.number == opts.version), None) if opts.version else versions[0]
    if chosen is None:
        raise CommandError(f"'{spec.name}' has no version {opts.version} (it has 1 to {versions[0].number}).")
    out.write(f"{spec.name}: {spec.title}\n")
    out.write(f"created by {spec.created_by.get_username()} at {spec.created_at:%Y-%m-%d %H:%M} UTC\n\n")
    out.write("Versions:\n")
    for v in versions:
        decided = f"  decided by {v.decided_by.get_username()} {v.decided_at:%Y-%m-%d %H:%M}" if v.decided_by else ""
        note = f'  "{v.decision_note}"' if v.decision_note else ""
        out.write(f"  v{v.number:<3} {v.status:<10} edited by {v.edited_by.get_username():<12}{decided}{note}\n")
    out.write("\nHistory:\n")
    for d in selectors.spec_history(name=spec.name):
        change = f"{d.from_status} -> {d.to_status}" if d.from_status else f"created ({d.to_status})"
        note = f'  "{d.note}"' if d.note else ""
        out.write(f"  {d.at:%Y-%m-%d %H:%M}  v{d.version.number:<3} {change:<24} {d.by_username}{note}\n")
    out.write(f"\n--- body of v{chosen.number} ({chosen.status}) ---\n{chosen.body}")
    return 0


@_spec_errors
def import_command(opts: argparse.Namespace, out: TextIO) -> int:
    result = services.spec_import(path=opts.file, name=opts.name, by=_user(opts))
    v = result.version
    what = {"created": "created", "new_version": "new version", "updated": "updated draft", "unchanged": "unchanged"}[
        result.outcome
    ]
    out.write(f"{v.spec.name}: {what} (v{v.number}, {v.status}) — {v.spec.title}\n")
    if v.status == "draft":
        out.write(f"Next: foundry specs submit {v.spec.name} --as USER\n")
    return 0


@_spec_errors
def transition_command(opts: argparse.Namespace, out: TextIO) -> int:
    action, by = opts.specs_action, _user(opts)
    if action == "submit":
        version = services.spec_submit(name=opts.name, by=by)
    else:
        version = getattr(services, f"spec_{action}")(name=opts.name, by=by, note=opts.note)
    out.write(f"{version.spec.name} v{version.number}: {version.status}\n")
    if action == "approve":
        out.write(f"Generation now uses '{version.spec.name}' v{version.number}.\n")
    return 0
