"""Governance UI: write, submit, approve and reject feature specs through the same services as the CLI."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypedDict

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.db.models import OuterRef, QuerySet, Subquery
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse

from sources.admin import ReadOnlyAdmin
from django.utils.html import format_html, format_html_join

from specs import services
from specs.errors import SpecError
from specs.models import FeatureSpec, SpecDecision, SpecStatus, SpecVersion

if TYPE_CHECKING:
    from django.contrib.auth.models import User
    from django_stubs_ext import WithAnnotations


class SpecColumns(TypedDict):
    """What ``FeatureSpecAdmin.get_queryset`` adds to each spec (None when the spec has no such version)."""

    latest_number: int | None
    latest_status: str | None
    approved_number: int | None


def _acting_user(request: HttpRequest) -> User:
    """The user acting in the admin, which serves only signed-in staff."""
    user = request.user
    assert user.is_authenticated
    return user


class FeatureSpecForm(forms.ModelForm):
    body = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 24, "cols": 100, "style": "font-family: monospace"}),
        help_text="Markdown. Changing the body of an approved or in-review spec creates a new draft "
        "version; generation keeps using the approved version until the new one is approved.",
    )

    class Meta:
        model = FeatureSpec
        fields = ["name", "title"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            self.fields["body"].initial = self.instance.latest_version.body

    def clean_name(self) -> str:
        name = self.cleaned_data["name"]
        if not services.NAME_RE.match(name):
            raise forms.ValidationError("Use lowercase letters, digits, '-' and '_'.")
        return name


class RejectForm(forms.Form):
    note = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 4, "cols": 80}),
        help_text="Why the spec is rejected; kept in the history and shown to the author.",
    )


class LatestStatusFilter(admin.SimpleListFilter):
    title = "status (latest version)"
    parameter_name = "status"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple[str, str]]:
        return list(SpecStatus.choices)

    def queryset(
        self, request: HttpRequest, queryset: QuerySet[WithAnnotations[FeatureSpec, SpecColumns]]
    ) -> QuerySet[WithAnnotations[FeatureSpec, SpecColumns]]:
        return queryset.filter(latest_status=self.value()) if self.value() else queryset


class InUseFilter(admin.SimpleListFilter):
    title = "used by generation"
    parameter_name = "approved"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple[str, str]]:
        return [("yes", "Has an approved version"), ("no", "No approved version")]

    def queryset(
        self, request: HttpRequest, queryset: QuerySet[WithAnnotations[FeatureSpec, SpecColumns]]
    ) -> QuerySet[WithAnnotations[FeatureSpec, SpecColumns]]:
        if self.value() in ("yes", "no"):
            return queryset.filter(approved_number__isnull=self.value() == "no")
        return queryset


class ReviewerMayView(admin.ModelAdmin):
    """Lets a holder of the approve permission view these pages without also holding ``view_*``.

    docs/specs.md promises that approving needs ``specs.approve_featurespec`` (and staff status for the
    admin). Without this Django shows such a reviewer no model at all: "You don't have permission
    to view or edit anything". Viewing is all it adds; changing still needs the change permission.
    """

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return super().has_view_permission(request, obj) or request.user.has_perm(services.APPROVE_PERMISSION)


@admin.register(FeatureSpec)
class FeatureSpecAdmin(ReviewerMayView, admin.ModelAdmin):
    form = FeatureSpecForm
    list_display = ["name", "title", "latest", "latest_status_display", "approved", "created_by", "created_at"]
    list_filter = [LatestStatusFilter, InUseFilter]
    search_fields = ["name", "title"]
    actions = ["submit_selected", "approve_selected", "reject_selected", "archive_selected"]
    decision_fields = ["latest_status_display", "decided_by", "decided_at", "decision_note", "versions", "history"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[WithAnnotations[FeatureSpec, SpecColumns]]:
        latest = SpecVersion.objects.filter(spec=OuterRef("pk")).order_by("-number")
        approved = SpecVersion.objects.filter(spec=OuterRef("pk"), status=SpecStatus.APPROVED)
        return (
            super()
            .get_queryset(request)
            .select_related("created_by")
            .annotate(
                latest_number=Subquery(latest.values("number")[:1]),
                latest_status=Subquery(latest.values("status")[:1]),
                approved_number=Subquery(approved.values("number")[:1]),
            )
        )

    def get_fields(self, request: HttpRequest, obj: FeatureSpec | None = None) -> tuple[str, ...]:
        if obj is None:
            return ("name", "title", "body")
        # "body" is a form field, not a model field: on a view-only page (a reviewer holding only the
        # approve permission) Django would show it as "-", so show the latest version's text instead.
        body = "body" if self.has_change_permission(request, obj) else "latest_body"
        return ("name", "title", body, "created_by", "created_at", *self.decision_fields)

    def get_readonly_fields(self, request: HttpRequest, obj: FeatureSpec | None = None) -> list[str]:
        # The name is what `--feature` and the history refer to, so it never changes.
        return ["name", "created_by", "created_at", *self.decision_fields] if obj else []

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # History is kept: retire a spec with "Archive" instead.

    def has_approve_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm(services.APPROVE_PERMISSION)

    # -- columns and read-only decision fields ---------------------------------------------

    @admin.display(description="latest", ordering="latest_number")
    def latest(self, obj: WithAnnotations[FeatureSpec, SpecColumns]) -> str:
        return f"v{obj.latest_number}"

    @admin.display(description="status", ordering="latest_status")
    def latest_status_display(self, obj: WithAnnotations[FeatureSpec, SpecColumns]) -> str:
        return SpecStatus(obj.latest_status).label if obj.latest_status else "-"

    @admin.display(description="approved (in use)", ordering="approved_number")
    def approved(self, obj: WithAnnotations[FeatureSpec, SpecColumns]) -> str:
        return f"v{obj.approved_number}" if obj.approved_number else "-"

    @admin.display(description="body")
    def latest_body(self, obj: FeatureSpec) -> str:
        version = obj.latest_version
        return format_html('<pre style="white-space: pre-wrap">{}</pre>', version.body if version else "")

    @admin.display(description="decided by")
    def decided_by(self, obj: FeatureSpec) -> str:
        version = obj.latest_version
        return str(version.decided_by or "-") if version else "-"

    @admin.display(description="decided at")
    def decided_at(self, obj: FeatureSpec) -> Any:
        version = obj.latest_version
        return (version.decided_at or "-") if version else "-"

    @admin.display(description="decision note")
    def decision_note(self, obj: FeatureSpec) -> str:
        version = obj.latest_version
        return (version.decision_note or "-") if version else "-"

    @admin.display(description="versions")
    def versions(self, obj: FeatureSpec) -> str:
        rows = format_html_join(
            "",
            '<tr><td><a href="{}">v{}</a></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>',
            (
                (
                    reverse("admin:specs_specversion_change", args=[v.pk]),
                    v.number,
                    v.get_status_display(),
                    v.edited_by,
                    v.decided_by or "",
                    v.decision_note,
                )
                for v in obj.versions.order_by("-number")
            ),
        )
        return format_html(
            "<table><tr><th>version</th><th>status</th><th>last edited by</th><th>decided by</th>"
            "<th>note</th></tr>{}</table>",
            rows,
        )

    @admin.display(description="history")
    def history(self, obj: FeatureSpec) -> str:
        rows = SpecDecision.objects.filter(version__spec=obj).select_related("version").order_by("at", "id")
        body = format_html_join(
            "",
            "<tr><td>{}</td><td>v{}</td><td>{} → {}</td><td>{}</td><td>{}</td></tr>",
            (
                (
                    d.at.strftime("%Y-%m-%d %H:%M"),
                    d.version.number,
                    d.from_status or "new",
                    d.to_status,
                    d.by_username,
                    d.note,
                )
                for d in rows
            ),
        )
        return format_html(
            "<table><tr><th>when</th><th>version</th><th>change</th><th>by</th><th>note</th></tr>{}</table>", body
        )

    # -- saving goes through the services ----------------------------------------------------

    def save_model(self, request: HttpRequest, obj: FeatureSpec, form: forms.Form, change: bool) -> None:
        data = form.cleaned_data
        if change:
            result = services.spec_edit(name=obj.name, title=data["title"], body=data["body"], by=_acting_user(request))
            if result.outcome == "new_version":
                self.message_user(
                    request,
                    f"Saved '{obj.name}' as new draft version {result.version.number}; "
                    "the approved version stays in use until this one is approved.",
                    messages.WARNING,
                )
            return
        version = services.spec_create(
            name=data["name"], title=data["title"], body=data["body"], by=_acting_user(request)
        )
        # The admin's add view needs the saved row's identity for its log entry and redirect.
        obj.pk, obj.created_by, obj.created_at = version.spec.pk, version.spec.created_by, version.spec.created_at
        obj._state.adding = False

    def save_related(self, request: HttpRequest, form: forms.Form, formsets: Any, change: bool) -> None:
        pass  # Versions are read-only here; nothing else is related.

    # -- actions ---------------------------------------------------------------------------

    def _apply(
        self, request: HttpRequest, queryset: QuerySet[FeatureSpec], step: Callable[[str], SpecVersion], verb: str
    ) -> None:
        """Run ``step`` on every selected spec and report each result on its own line."""
        for spec in queryset.order_by("name"):
            try:
                version = step(spec.name)
            except SpecError as exc:
                # Every spec error names the spec, so the line stands on its own.
                self.message_user(request, str(exc), messages.ERROR)
            else:
                self.message_user(request, f"Version {version.number} of '{spec.name}' {verb}.", messages.SUCCESS)

    @admin.action(description="Submit selected specs for review")
    def submit_selected(self, request: HttpRequest, queryset: QuerySet[FeatureSpec]) -> None:
        self._apply(
            request,
            queryset,
            lambda name: services.spec_submit(name=name, by=_acting_user(request)),
            "submitted for review",
        )

    @admin.action(description="Approve selected specs", permissions=["approve"])
    def approve_selected(self, request: HttpRequest, queryset: QuerySet[FeatureSpec]) -> None:
        self._apply(
            request, queryset, lambda name: services.spec_approve(name=name, by=_acting_user(request)), "approved"
        )

    @admin.action(description="Archive selected specs (stop using them for generation)", permissions=["approve"])
    def archive_selected(self, request: HttpRequest, queryset: QuerySet[FeatureSpec]) -> None:
        self._apply(
            request, queryset, lambda name: services.spec_archive(name=name, by=_acting_user(request)), "archived"
        )

    @admin.action(description="Reject selected specs…", permissions=["approve"])
    def reject_selected(self, request: HttpRequest, queryset: QuerySet[FeatureSpec]) -> HttpResponse | None:
        """Ask for the rejection note on an intermediate page, then reject each spec with it."""
        form = RejectForm(request.POST if request.POST.get("confirm") == "yes" else None)
        if form.is_valid():
            note = form.cleaned_data["note"]
            self._apply(
                request,
                queryset,
                lambda name: services.spec_reject(name=name, by=_acting_user(request), note=note),
                "rejected",
            )
            return None
        context = {
            **self.admin_site.each_context(request),
            "title": "Reject feature specs",
            "opts": self.model._meta,
            "specs": queryset.order_by("name"),
            "form": form,
            "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
        }
        return TemplateResponse(request, "admin/specs/featurespec/reject_confirmation.html", context)


@admin.register(SpecVersion)
class SpecVersionAdmin(ReviewerMayView, ReadOnlyAdmin):
    """Every version with its body; read-only (change specs through their spec page or the CLI)."""

    list_display = ["spec", "number", "status", "edited_by", "updated_at", "decided_by", "decided_at"]
    list_filter = ["status"]
    search_fields = ["spec__name", "spec__title"]
    list_select_related = ["spec", "edited_by", "decided_by"]
    fields = readonly_fields = (
        "spec",
        "number",
        "status",
        "body",
        "created_by",
        "created_at",
        "edited_by",
        "updated_at",
        "decided_by",
        "decided_at",
        "decision_note",
    )


@admin.register(SpecDecision)
class SpecDecisionAdmin(ReviewerMayView, ReadOnlyAdmin):
    """The append-only decision history."""

    list_display = ["at", "version", "from_status", "to_status", "by_username", "note"]
    list_filter = ["to_status"]
    search_fields = ["version__spec__name", "by_username", "note"]
    list_select_related = ["version__spec"]
    date_hierarchy = "at"
