"""Generation runs: one row per requested document, from request to file."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class GenerationRun(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        RUNNING = "running", "Running"
        SUCCEEDED = "succeeded", "Succeeded"
        # The document was written, but with low confidence (``low_confidence``): check it before use.
        NEEDS_REVIEW = "needs_review", "Needs review"
        FAILED = "failed", "Failed"

    topic = models.TextField()
    spec_name = models.CharField(max_length=100, help_text="The approved feature spec the document follows.")
    spec_version = models.PositiveIntegerField()
    spec_body = models.TextField(editable=False, help_text="The spec text as used, kept for audit.")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.PENDING, db_index=True)
    stage = models.CharField(max_length=40, blank=True, editable=False)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, editable=False
    )
    collection_ids = models.JSONField(
        null=True,
        blank=True,
        default=None,
        editable=False,
        help_text="Collections searched; null means every collection.",
    )
    models_used = models.JSONField(default=dict, editable=False)
    prompt = models.TextField(blank=True, editable=False)
    chunks = models.JSONField(default=list, editable=False, help_text="Retrieved chunk ids with scores.")
    gate = models.JSONField(default=dict, editable=False)
    conflicts = models.JSONField(default=list, editable=False)
    output_path = models.CharField(max_length=1024, blank=True, editable=False)
    coverage = models.FloatField(null=True, blank=True, editable=False)
    low_confidence = models.BooleanField(
        default=False,
        editable=False,
        help_text="Coverage was below generation.min_coverage when the document was "
        "written: the document says so under its title.",
    )
    grounding = models.JSONField(
        default=dict,
        blank=True,
        editable=False,
        help_text="What the model wrote and the grounding check's verdict on each sentence "
        "(unsupported ones were left out of the document).",
    )
    sentences_total = models.PositiveIntegerField(default=0, editable=False)
    sentences_kept = models.PositiveIntegerField(default=0, editable=False)
    prompt_tokens = models.PositiveIntegerField(default=0, editable=False)
    completion_tokens = models.PositiveIntegerField(default=0, editable=False)
    cost = models.FloatField(default=0.0, editable=False)
    llm_calls = models.PositiveIntegerField(default=0, editable=False)
    timings = models.JSONField(default=dict, editable=False)
    error = models.JSONField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(default=timezone.now, editable=False, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True, editable=False)
    finished_at = models.DateTimeField(null=True, blank=True, editable=False)
    heartbeat_at = models.DateTimeField(
        default=timezone.now, editable=False, help_text="Last sign of life; the stale-run sweeper reads it."
    )
    attempts = models.PositiveIntegerField(default=0, editable=False)

    class Meta:
        ordering = ["-created_at"]

    @property
    def is_finished(self) -> bool:
        return self.status in FINISHED

    @property
    def wrote_document(self) -> bool:
        """Whether the run ended by writing its document (it may still need review)."""
        return self.status in WROTE_DOCUMENT

    def __str__(self) -> str:
        return f"Run {self.pk}: {self.topic[:60]}"


# A run in one of these states will not change any more; the first two wrote a document.
WROTE_DOCUMENT = (GenerationRun.Status.SUCCEEDED, GenerationRun.Status.NEEDS_REVIEW)
FINISHED = (*WROTE_DOCUMENT, GenerationRun.Status.FAILED)
