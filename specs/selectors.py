"""Reads over feature specs, including the one question generation asks: which spec do I use?"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import QuerySet

from specs.errors import SpecNotFound, SpecSelectionError
from specs.models import FeatureSpec, SpecDecision, SpecStatus, SpecVersion


@dataclass(frozen=True)
class SelectedSpec:
    """The approved version generation works from, as plain values.

    Generation sits to the left of ``specs`` in the dependency order, so it receives this
    row (from the CLI or API layer) instead of importing spec models.
    """

    name: str
    title: str
    version: int
    body: str
    version_id: int
    approved_by: str
    approved_at: datetime


def spec_name_normalise(name: str) -> str:
    """``--feature`` takes the name without ``.md``; accept it with the extension too."""
    name = name.strip()
    return name[:-3] if name.lower().endswith(".md") else name


def spec_get(*, name: str, lock: bool = False) -> FeatureSpec:
    """The spec called ``name``, or ``SpecNotFound`` naming the specs that do exist.

    ``lock`` (inside a service's transaction) holds the row until the transaction ends, so two services on one
    spec run one after the other on PostgreSQL; SQLite's ``BEGIN IMMEDIATE`` already serialises every writer,
    and Django sends no ``FOR UPDATE`` there."""
    name = spec_name_normalise(name)
    found = FeatureSpec.objects.filter(name=name)
    spec = (found.select_for_update() if lock else found).first()
    if spec is not None:
        return spec
    known = list(FeatureSpec.objects.order_by("name").values_list("name", flat=True))
    if not known:
        raise SpecNotFound(
            f"No feature spec named '{name}': there are no feature specs yet. "
            "Import one with `foundry specs import FILE.md`."
        )
    raise SpecNotFound(f"No feature spec named '{name}'. Known specs: {', '.join(known)}.")


def spec_list() -> QuerySet[FeatureSpec]:
    """Every spec with its versions prefetched (newest first)."""
    return FeatureSpec.objects.order_by("name").prefetch_related("versions")


def approved_versions() -> QuerySet[SpecVersion]:
    """The approved version of every spec that has one, by spec name."""
    return (
        SpecVersion.objects.filter(status=SpecStatus.APPROVED)
        .select_related("spec", "decided_by")
        .order_by("spec__name")
    )


def spec_history(*, name: str) -> QuerySet[SpecDecision]:
    """Every decision on every version of ``name``, oldest first."""
    spec = spec_get(name=name)
    return SpecDecision.objects.filter(version__spec=spec).select_related("version").order_by("at", "id")


def spec_for_generation(name: str | None = None) -> SelectedSpec:
    """The approved spec generation must use.

    With ``name``: that spec's approved version. Without: the only approved spec. Raises
    ``SpecSelectionError`` (or ``SpecNotFound``) with a message that says what to do when
    there is none, several, or the named spec has no approved version.
    """
    if name:
        spec = spec_get(name=name)
        version = approved_versions().filter(spec=spec).first()
        if version is None:
            raise SpecSelectionError(_not_approved_message(spec))
        return _selected(version)
    approved = list(approved_versions())
    if not approved:
        raise SpecSelectionError(
            "No approved feature spec. Import one with `foundry specs import FILE.md`, submit it "
            "(`foundry specs submit NAME`) and have it approved in the admin or with "
            "`foundry specs approve NAME --as REVIEWER`."
        )
    if len(approved) > 1:
        names = ", ".join(v.spec.name for v in approved)
        raise SpecSelectionError(f"Several approved feature specs: {names}. Choose one with --feature NAME.")
    return _selected(approved[0])


def _not_approved_message(spec: FeatureSpec) -> str:
    latest = spec.latest_version
    state = f"latest is version {latest.number}, {latest.get_status_display().lower()}" if latest else "no versions"
    others = ", ".join(v.spec.name for v in approved_versions()) or "none"
    return f"Feature spec '{spec.name}' has no approved version ({state}). Approved specs: {others}."


def _selected(version: SpecVersion) -> SelectedSpec:
    # Only approved versions come here, and approving a version sets decided_at (services._move).
    assert version.decided_at is not None
    return SelectedSpec(
        name=version.spec.name,
        title=version.spec.title,
        version=version.number,
        body=version.body,
        version_id=version.pk,
        approved_by=version.decided_by.get_username() if version.decided_by else "",
        approved_at=version.decided_at,
    )
