"""Every write to feature specs. Only these functions change a version's status.

Each service runs in one transaction. The database backend opens transactions with
``BEGIN IMMEDIATE``, so the state read at the start of a service cannot change under it:
two reviewers approving at once are serialised, and the second sees the first's result.
On PostgreSQL the spec's row is locked when it is read (``spec_get(lock=True)``), to the same end.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import yaml
from django.db import transaction
from django.utils import timezone
from django.utils.text import slugify

from specs.errors import SpecInputError, SpecPermissionError, SpecTransitionError
from specs.models import FeatureSpec, SpecDecision, SpecStatus, SpecVersion
from specs.selectors import spec_get, spec_name_normalise

if TYPE_CHECKING:
    from django.contrib.auth.models import User

logger = logging.getLogger(__name__)

APPROVE_PERMISSION = "specs.approve_featurespec"
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]*$")

# action → (statuses it may start from, status it leads to)
TRANSITIONS: dict[str, tuple[set[str], str]] = {
    "submit": ({SpecStatus.DRAFT}, SpecStatus.IN_REVIEW),
    "approve": ({SpecStatus.IN_REVIEW}, SpecStatus.APPROVED),
    "reject": ({SpecStatus.IN_REVIEW}, SpecStatus.REJECTED),
    "archive": ({SpecStatus.APPROVED}, SpecStatus.ARCHIVED),
}
_STATE: dict[str, str] = {
    SpecStatus.DRAFT: "is a draft",
    SpecStatus.IN_REVIEW: "is in review",
    SpecStatus.APPROVED: "is approved",
    SpecStatus.REJECTED: "was rejected",
    SpecStatus.ARCHIVED: "is archived",
}
_NEXT_STEP: dict[str, str] = {
    SpecStatus.DRAFT: "submit it for review first (`foundry specs submit {name}`)",
    SpecStatus.IN_REVIEW: "it is waiting for a reviewer to approve or reject it",
    SpecStatus.APPROVED: "edit its body to start a new version",
    SpecStatus.REJECTED: "edit its body to start a new version",
    SpecStatus.ARCHIVED: "edit its body to start a new version",
}


@dataclass(frozen=True)
class EditResult:
    """What an edit or import did: ``created``, ``new_version``, ``updated`` (draft edited) or ``unchanged``."""

    version: SpecVersion
    outcome: str


def spec_create(*, name: str, title: str, body: str, by: User) -> SpecVersion:
    """Create spec ``name`` with version 1 as a draft. Fails if the name is taken or invalid."""
    name, title, body = _valid_name(name), title.strip(), _valid_body(body)
    _check_active(by)
    with transaction.atomic():
        if FeatureSpec.objects.filter(name=name).exists():
            raise SpecInputError(
                f"A feature spec named '{name}' already exists; edit it instead "
                f"(`foundry specs import FILE.md` updates it)."
            )
        spec = FeatureSpec.objects.create(name=name, title=title or name, created_by=by)
        version = _new_version(spec=spec, number=1, body=body, by=by, note="version 1 created")
    logger.info("spec %s created (version id %s)", name, version.pk)
    return version


def spec_edit(*, name: str, body: str, by: User, title: str | None = None) -> EditResult:
    """Change the body (and optionally the title) of ``name``.

    A draft is edited in place. Any other latest version stays as it is (approved keeps
    being used by generation) and the change becomes a new draft version; a version that
    was in review is withdrawn (recorded as rejected, "superseded") so only one version is
    ever open. Editing with the same body and title changes nothing (idempotent).
    """
    body = _valid_body(body)
    _check_active(by)
    with transaction.atomic():
        spec = spec_get(name=name, lock=True)
        latest = _latest_version(spec)
        new_title = (title or "").strip()
        title_changed = bool(new_title) and new_title != spec.title
        if title_changed:
            spec.title = new_title
            spec.save(update_fields=["title"])
        if body == latest.body:
            return EditResult(latest, "updated" if title_changed else "unchanged")
        if latest.status == SpecStatus.DRAFT:
            latest.body, latest.edited_by, latest.updated_at = body, by, timezone.now()
            latest.save(update_fields=["body", "edited_by", "updated_at"])
            return EditResult(latest, "updated")
        number = latest.number + 1
        if latest.status == SpecStatus.IN_REVIEW:
            _move(
                latest,
                to=SpecStatus.REJECTED,
                by=by,
                note=f"Withdrawn: superseded by version {number}, edited by {by.get_username()} while in review.",
            )
        version = _new_version(
            spec=spec,
            number=number,
            body=body,
            by=by,
            note=f"version {number} created (previous: version {latest.number}, {latest.get_status_display().lower()})",
        )
    logger.info("spec %s: new version %s (id %s)", spec.name, number, version.pk)
    return EditResult(version, "new_version")


def spec_import(*, path: Path, by: User, name: str | None = None) -> EditResult:
    """Create or update a spec from a Markdown file.

    The name comes from ``name``, else front matter ``name:``, else the file stem; the title
    from front matter ``title:``, else the first ``# H1``, else the name. Importing a file
    whose spec exists is an edit (see ``spec_edit``); importing it again changes nothing.
    """
    front, body = _read_markdown(Path(path))
    name = spec_name_normalise(name or str(front.get("name") or "") or slugify(Path(path).stem))
    title = str(front.get("title") or "") or _first_h1(body) or name
    with transaction.atomic():
        if FeatureSpec.objects.filter(name=name).exists():
            return spec_edit(name=name, body=body, title=title, by=by)
        return EditResult(spec_create(name=name, title=title, body=body, by=by), "created")


def spec_submit(*, name: str, by: User) -> SpecVersion:
    """Put the draft of ``name`` up for review. Any active user may submit."""
    _check_active(by)
    with transaction.atomic():
        version = _latest_for(name=name, action="submit")
        return _move(version, to=SpecStatus.IN_REVIEW, by=by)


def spec_approve(*, name: str, by: User, note: str = "") -> SpecVersion:
    """Approve the version of ``name`` that is in review; the previously approved version is archived.

    Requires ``specs.approve_featurespec``; the spec's creator and the version's authors may
    not approve it (superusers may).
    """
    _check_reviewer(by=by, action="approve", name=name)
    with transaction.atomic():
        version = _latest_for(name=name, action="approve")
        _check_not_author(version=version, by=by)
        previous = version.spec.versions.filter(status=SpecStatus.APPROVED).first()
        if previous is not None:
            _move(previous, to=SpecStatus.ARCHIVED, by=by, note=f"Superseded by version {version.number}.")
        return _move(version, to=SpecStatus.APPROVED, by=by, note=note.strip())


def spec_reject(*, name: str, by: User, note: str) -> SpecVersion:
    """Reject the version of ``name`` that is in review, saying why. Requires the approve permission."""
    if not note or not note.strip():
        raise SpecInputError(
            f"cannot reject '{spec_name_normalise(name)}': a rejection needs a note saying why (--note TEXT)."
        )
    _check_reviewer(by=by, action="reject", name=name)
    with transaction.atomic():
        version = _latest_for(name=name, action="reject")
        return _move(version, to=SpecStatus.REJECTED, by=by, note=note.strip())


def spec_archive(*, name: str, by: User, note: str = "") -> SpecVersion:
    """Retire the approved version of ``name``: generation stops using the spec."""
    _check_reviewer(by=by, action="archive", name=name)
    with transaction.atomic():
        spec = spec_get(name=name, lock=True)
        version = spec.approved_version
        if version is None:
            latest = _latest_version(spec)
            raise SpecTransitionError(
                f"cannot archive '{spec.name}': it has no approved version "
                f"(latest is version {latest.number}, {latest.get_status_display().lower()})."
            )
        return _move(version, to=SpecStatus.ARCHIVED, by=by, note=note.strip())


# -- helpers ------------------------------------------------------------------------------


def _latest_for(*, name: str, action: str) -> SpecVersion:
    """The latest version of ``name``, if ``action`` is legal from its status."""
    spec = spec_get(name=name, lock=True)
    version = _latest_version(spec)
    allowed, _ = TRANSITIONS[action]
    if version.status not in allowed:
        step = _NEXT_STEP[version.status].format(name=spec.name)
        raise SpecTransitionError(
            f"cannot {action} '{spec.name}': version {version.number} {_STATE[version.status]}; {step}."
        )
    return version


def _latest_version(spec: FeatureSpec) -> SpecVersion:
    latest = spec.latest_version
    # spec_create makes version 1 in the spec's own transaction, and versions are never deleted (PROTECT).
    assert latest is not None, f"feature spec {spec.pk} has no version"
    return latest


def _move(version: SpecVersion, *, to: str, by: User, note: str = "") -> SpecVersion:
    """Apply one status change and record it. Callers have checked that it is legal."""
    from_status = version.status
    version.status = to
    fields = ["status"]
    if to in (SpecStatus.APPROVED, SpecStatus.REJECTED, SpecStatus.ARCHIVED):
        version.decided_by, version.decided_at, version.decision_note = by, timezone.now(), note
        fields += ["decided_by", "decided_at", "decision_note"]
    version.save(update_fields=fields)
    SpecDecision.objects.record(version=version, from_status=from_status, to_status=to, by=by, note=note)
    logger.info("spec version %s: %s -> %s by user %s", version.pk, from_status, to, by.pk)
    return version


def _new_version(*, spec: FeatureSpec, number: int, body: str, by: User, note: str) -> SpecVersion:
    version = SpecVersion.objects.create(spec=spec, number=number, body=body, created_by=by, edited_by=by)
    SpecDecision.objects.record(version=version, from_status="", to_status=SpecStatus.DRAFT, by=by, note=note)
    return version


def _check_active(by: User) -> None:
    if by is None or not by.is_active:
        raise SpecPermissionError(
            f"user {by and by.get_username()!r} is not an active user; inactive users cannot change feature specs."
        )


def _check_reviewer(*, by: User, action: str, name: str) -> None:
    _check_active(by)
    if not by.has_perm(APPROVE_PERMISSION):
        raise SpecPermissionError(
            f"{by.get_username()} may not {action} '{spec_name_normalise(name)}': that needs the permission "
            f"'{APPROVE_PERMISSION}' (\"Can approve, reject and archive feature specs\")."
        )


def _check_not_author(*, version: SpecVersion, by: User) -> None:
    """Four eyes: whoever created the spec or wrote this version may not approve it."""
    authors = {version.spec.created_by_id, version.created_by_id, version.edited_by_id}
    if by.pk in authors and not by.is_superuser:
        raise SpecPermissionError(
            f"{by.get_username()} may not approve '{version.spec.name}' version {version.number}: "
            "they created or edited it. Another reviewer has to approve it."
        )


def _valid_name(name: str) -> str:
    name = spec_name_normalise(name)
    if not NAME_RE.match(name) or len(name) > 100:
        raise SpecInputError(
            f"invalid spec name {name!r}: use lowercase letters, digits, '-' and '_' "
            "(at most 100 characters; it is what --feature NAME takes)."
        )
    return name


def _valid_body(body: str) -> str:
    if not body or not body.strip():
        raise SpecInputError("a feature spec needs a non-empty Markdown body.")
    # Browsers post textareas with CRLF; normalise so an unchanged body compares equal.
    return body.replace("\r\n", "\n").strip() + "\n"


def _read_markdown(path: Path) -> tuple[dict, str]:
    """Front matter (a YAML mapping between ``---`` lines at the top) and the body after it."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecInputError(f"No such file: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecInputError(f"cannot read {path}: {exc}") from None
    match = re.match(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", text, re.DOTALL)
    if not match:
        if re.match(r"\A---[ \t]*\r?\n", text):
            raise SpecInputError(f"{path}:1: front matter opened by '---' is never closed by a '---' line")
        return {}, text
    try:
        front = yaml.safe_load(match.group(1)) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 2}:{mark.column + 1}" if mark else ""  # + the opening '---' line, 1-based
        reason = " ".join(
            str(part) for part in (getattr(exc, "context", None), getattr(exc, "problem", None)) if part
        ) or str(exc)
        raise SpecInputError(f"{path}{where}: invalid front matter: {reason}") from None
    if not isinstance(front, dict):
        raise SpecInputError(f"{path}: front matter must be a mapping such as 'name: wiring-guide'.")
    for key in ("name", "title"):  # YAML reads `name: 123` as a number and `title: [a, b]` as a list
        if key in front and not isinstance(front[key], str):
            raise SpecInputError(
                f"{path}: front matter '{key}' must be text, not {front[key]!r} "
                f'({type(front[key]).__name__}); quote it, e.g. {key}: "{front[key]}"'
            )
    return front, text[match.end() :]


def _first_h1(body: str) -> str:
    in_fence = False
    for line in body.splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            in_fence = not in_fence
        elif not in_fence and (m := re.match(r"^#\s+(.+?)\s*#*\s*$", line)):
            return m.group(1)
    return ""
