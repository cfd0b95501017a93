from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from foundry_site.models import ApiToken
from foundry_site.services.tokens import TokenError, token_revoke

admin.site.site_header = "Foundry administration"
admin.site.site_title = "Foundry administration"
admin.site.index_title = "Administration"


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Tokens are created with ``foundry tokens create`` (the plain token is shown only there)."""

    list_display = ["id", "prefix", "name", "user", "created_at", "last_used_at", "revoked_at"]
    list_filter = [("revoked_at", admin.EmptyFieldListFilter)]
    search_fields = ["name", "prefix", "user__username"]
    readonly_fields = ["user", "prefix", "created_at", "last_used_at", "revoked_at"]
    fields = ["user", "name", "prefix", "created_at", "last_used_at", "revoked_at"]
    actions = ["revoke_selected"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    @admin.action(description="Revoke selected tokens", permissions=["change"])
    def revoke_selected(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        revoked = 0
        for token in queryset.filter(revoked_at__isnull=True):
            try:
                token_revoke(token_id=token.pk)
                revoked += 1
            except TokenError as exc:  # revoked concurrently: report, keep going
                self.message_user(request, str(exc), messages.WARNING)
        self.message_user(request, f"Revoked {revoked} token(s).", messages.SUCCESS)
