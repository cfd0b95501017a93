"""API tokens: a user's credential for the JSON API, stored only as a sha256 hash."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class ApiToken(models.Model):
    """One bearer token. The plain token is shown once at creation and never stored."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100, blank=True)
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    prefix = models.CharField(max_length=12, editable=False, help_text="Start of the token, to recognise it.")
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "API token"

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.name or 'unnamed'})"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None
