"""Feature specs: a named spec, its numbered versions, and the append-only decision history.

A ``FeatureSpec`` is the identity (``name`` is what ``foundry generate --feature`` takes).
Each body change that follows a review produces a new ``SpecVersion``. A version moves
``draft → in_review → approved | rejected`` and ``approved → archived``; only
``specs.services`` changes ``status``. Generation uses the one approved version of a spec
until a newer version is approved, which archives the older one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

if TYPE_CHECKING:
    from django.contrib.auth.models import User


class SpecStatus(models.TextChoices):
    DRAFT = "draft", "Draft"
    IN_REVIEW = "in_review", "In review"
    APPROVED = "approved", "Approved"
    REJECTED = "rejected", "Rejected"
    ARCHIVED = "archived", "Archived"


OPEN_STATUSES = (SpecStatus.DRAFT, SpecStatus.IN_REVIEW)


class FeatureSpec(models.Model):
    name = models.SlugField(
        max_length=100, unique=True, help_text="Identifier used by `foundry generate --feature NAME`."
    )
    title = models.CharField(max_length=300)
    # Users who touched a spec are protected from deletion: deactivate them instead,
    # so the governance history keeps saying who did what.
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+", editable=False)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["name"]
        permissions = [("approve_featurespec", "Can approve, reject and archive feature specs")]

    def __str__(self) -> str:
        return self.name

    @property
    def latest_version(self) -> SpecVersion | None:
        return self.versions.order_by("-number").first()

    @property
    def approved_version(self) -> SpecVersion | None:
        return self.versions.filter(status=SpecStatus.APPROVED).first()


class SpecVersion(models.Model):
    Status = SpecStatus

    spec = models.ForeignKey(FeatureSpec, on_delete=models.PROTECT, related_name="versions")
    number = models.PositiveIntegerField(editable=False)
    body = models.TextField(help_text="Markdown; becomes the feature-spec part of the generation prompt.")
    status = models.CharField(max_length=12, choices=SpecStatus.choices, default=SpecStatus.DRAFT, editable=False)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+", editable=False)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    edited_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.PROTECT,
        related_name="+",
        editable=False,
        help_text="Last editor of the body.",
    )
    updated_at = models.DateTimeField(default=timezone.now, editable=False)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+", editable=False
    )
    decided_at = models.DateTimeField(null=True, blank=True, editable=False)
    decision_note = models.TextField(blank=True, editable=False)

    class Meta:
        ordering = ["spec__name", "-number"]
        constraints = [
            models.UniqueConstraint(fields=["spec", "number"], name="specversion_unique_number"),
            # At most one version per spec is used by generation ...
            models.UniqueConstraint(
                fields=["spec"], condition=Q(status=SpecStatus.APPROVED), name="specversion_one_approved"
            ),
            # ... and at most one is being worked on or reviewed.
            models.UniqueConstraint(
                fields=["spec"], condition=Q(status__in=OPEN_STATUSES), name="specversion_one_open"
            ),
        ]
        indexes = [models.Index(fields=["status"])]

    def __str__(self) -> str:
        return f"{self.spec.name} v{self.number} ({self.get_status_display().lower()})"


class SpecDecisionManager(models.Manager["SpecDecision"]):
    def record(
        self, *, version: SpecVersion, from_status: str, to_status: str, by: User, note: str = ""
    ) -> SpecDecision:
        """The only way to write a decision row; rows are never updated or deleted."""
        return self.create(
            version=version,
            from_status=from_status,
            to_status=to_status,
            by=by,
            by_username=by.get_username(),
            note=note,
        )


class SpecDecision(models.Model):
    """Append-only history: every status change of every version, who made it, when, and why."""

    version = models.ForeignKey(SpecVersion, on_delete=models.PROTECT, related_name="decisions", editable=False)
    # Blank when the row records the creation of a version rather than a status change.
    from_status = models.CharField(max_length=12, choices=SpecStatus.choices, blank=True, editable=False)
    to_status = models.CharField(max_length=12, choices=SpecStatus.choices, editable=False)
    by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+", editable=False)
    by_username = models.CharField(max_length=150, editable=False)
    at = models.DateTimeField(default=timezone.now, editable=False)
    note = models.TextField(blank=True, editable=False)

    objects = SpecDecisionManager()

    class Meta:
        ordering = ["at", "id"]

    def __str__(self) -> str:
        return f"{self.version}: {self.from_status} → {self.to_status} by {self.by_username}"
