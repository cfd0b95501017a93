"""What generation writes: a run per requested document, and the query log of every question asked.

The query log's tables are named ``retrieval_querylog``, ``retrieval_conversation`` and
``retrieval_queryfeedback``: the names are fixed, so no migration renames or rebuilds the audit trail.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_noop  # choice labels: translated where a page shows them


def collection_ids_field() -> models.JSONField:
    """The collections a question or a run searched, as ids; null means every collection."""
    return models.JSONField(
        null=True,
        blank=True,
        default=None,
        editable=False,
        help_text="Collections searched; null means every collection.",
    )


def chain_seq_field() -> models.PositiveBigIntegerField:
    """The row's place in its audit chain (1, 2, …; generation/audit_chain.py); null until the row is chained."""
    return models.PositiveBigIntegerField(null=True, blank=True, editable=False, help_text="Place in the audit chain.")


def chain_hash_field() -> models.CharField:
    # Null, not "", until chained: SQLite adds a nullable column without a default in place (no table rebuild).
    return models.CharField(
        max_length=64,
        null=True,
        blank=True,
        editable=False,
        help_text="SHA-256 of the previous row's hash and this row's content (generation/audit_chain.py).",
    )


class AuditChainHead(models.Model):
    """The newest link of one audit chain: its place and hash. Appending locks this row, so concurrent writers
    chain one after another, and verification compares it with the last row, so rows cut off the end show."""

    chain = models.CharField(max_length=20, primary_key=True)
    seq = models.PositiveBigIntegerField(default=0)
    hash = models.CharField(max_length=64)

    def __str__(self) -> str:
        return f"{self.chain} #{self.seq}"


class GenerationRun(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending", gettext_noop("Pending")
        RUNNING = "running", gettext_noop("Running")
        SUCCEEDED = "succeeded", gettext_noop("Succeeded")
        # The document was written, but with low confidence (``low_confidence``): check it before use.
        NEEDS_REVIEW = "needs_review", gettext_noop("Needs review")
        FAILED = "failed", gettext_noop("Failed")

    topic = models.TextField()
    spec_name = models.CharField(max_length=100, help_text="The approved feature spec the document follows.")
    spec_version = models.PositiveIntegerField()
    spec_body = models.TextField(editable=False, help_text="The spec text as used, kept for audit.")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.PENDING, db_index=True)
    stage = models.CharField(max_length=40, blank=True, editable=False)
    # PROTECT: the run's audit hash names who asked; a user who asked is deactivated, never deleted.
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, editable=False
    )
    collection_ids = collection_ids_field()
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
    chain_seq = chain_seq_field()
    chain_hash = chain_hash_field()

    class Meta:
        ordering = ["-created_at"]
        constraints = [models.UniqueConstraint(fields=["chain_seq"], name="generationrun_chain_seq_unique")]

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


class AppendOnlyError(Exception):
    """Audit rows are never changed or deleted."""


class QueryLogQuerySet(models.QuerySet):
    def update(self, **kwargs: Any) -> int:
        raise AppendOnlyError("QueryLog rows cannot be updated")

    def delete(self) -> tuple[int, dict[str, int]]:
        raise AppendOnlyError("QueryLog rows cannot be deleted")


class QueryLogManager(models.Manager.from_queryset(QueryLogQuerySet)):  # type: ignore[misc]
    """Rows are written only by ``generation.audit_chain.query_record``, which chains each to the one before."""


class Conversation(models.Model):
    """A run of questions and answers; its turns are the QueryLog rows that point to it, oldest first.

    Follow-ups are made standalone from the earlier turns before retrieval (generation/condense/).
    Owned like a query: only its owner (and auditors, read-only) ever see it.
    """

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="conversations", editable=False
    )
    collection = models.ForeignKey(
        "sources.Collection",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        editable=False,
        help_text="The one collection its questions search; empty means every "
        "collection the owner can read when asking.",
    )
    title = models.CharField(max_length=200, editable=False, help_text="The first question, shortened.")
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(
        default=timezone.now, editable=False, db_index=True, help_text="When its latest turn was asked."
    )

    class Meta:
        db_table = "retrieval_conversation"
        ordering = ["-updated_at", "-pk"]
        indexes = [models.Index(fields=["owner", "updated_at"], name="conversation_owner_updated")]

    def __str__(self) -> str:
        return self.title


class QueryLog(models.Model):
    class AnswerClass(models.TextChoices):
        NORMAL = "normal", gettext_noop("Normal")
        LOW_CONFIDENCE = "low_confidence", gettext_noop("Low confidence")
        NO_EVIDENCE = "no_evidence", gettext_noop("No evidence")

    class Status(models.TextChoices):
        OK = "ok", gettext_noop("Answered")
        FAILED = "failed", gettext_noop("Failed")

    class Kind(models.TextChoices):
        ANSWER = "answer", gettext_noop("Answer")
        SEARCH = "search", gettext_noop("Search (passages only, no answer)")

    run_id = models.CharField(max_length=40, unique=True, editable=False)
    kind = models.CharField(
        max_length=8,
        choices=Kind.choices,
        default=Kind.ANSWER,
        editable=False,
        help_text="A question answered (or refused), or a search that returned passages only.",
    )
    # PROTECT: the row's audit hash names who asked; a user who asked is deactivated, never deleted.
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="queries",
        editable=False,
    )
    question = models.TextField(editable=False)
    message = models.TextField(
        blank=True,
        editable=False,
        help_text="The asker's own words when they were a follow-up in a conversation; "
        "question is then the standalone question that was answered.",
    )
    conversation = models.ForeignKey(
        Conversation,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="turns",
        editable=False,
        help_text="The conversation this question was a turn of.",
    )
    mode = models.CharField(max_length=10, editable=False)
    collection_ids = collection_ids_field()
    hyde_text = models.TextField(blank=True, editable=False)
    channels = models.JSONField(default=dict, editable=False, help_text="Chunk ids and scores per channel.")
    gate = models.JSONField(default=dict, editable=False)
    answer_class = models.CharField(max_length=16, choices=AnswerClass.choices, blank=True, editable=False)
    answer = models.TextField(blank=True, editable=False)
    citations = models.JSONField(default=list, editable=False)
    grounding = models.JSONField(
        default=dict,
        blank=True,
        editable=False,
        help_text="What the model wrote and the grounding check's verdict on each sentence "
        "(unsupported ones were withheld from the answer).",
    )
    conflicts = models.JSONField(default=list, editable=False)
    coverage = models.FloatField(null=True, blank=True, editable=False)
    refusal = models.CharField(
        max_length=10,
        blank=True,
        editable=False,
        help_text="Why nothing was answered: gate, relevance, grounding or model.",
    )
    prompt_tokens = models.PositiveIntegerField(default=0, editable=False)
    completion_tokens = models.PositiveIntegerField(default=0, editable=False)
    cost = models.FloatField(default=0.0, editable=False)
    llm_calls = models.PositiveIntegerField(default=0, editable=False)
    model = models.CharField(max_length=200, blank=True, editable=False)
    timings = models.JSONField(default=dict, editable=False, help_text="Milliseconds per stage.")
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.OK, editable=False)
    error = models.TextField(blank=True, editable=False)
    cached = models.BooleanField(default=False, editable=False)
    cache_key = models.CharField(
        max_length=64,
        blank=True,
        db_index=True,
        editable=False,
        help_text="Question, scope, configuration and index version, hashed.",
    )
    created_at = models.DateTimeField(default=timezone.now, editable=False, db_index=True)
    chain_seq = chain_seq_field()
    chain_hash = chain_hash_field()

    objects = QueryLogManager()

    class Meta:
        db_table = "retrieval_querylog"
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["answer_class"]), models.Index(fields=["user", "created_at"])]
        constraints = [models.UniqueConstraint(fields=["chain_seq"], name="querylog_chain_seq_unique")]

    def __str__(self) -> str:
        return f"{self.run_id}: {self.question[:60]}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not getattr(self, "_recording", False) or not self._state.adding:
            raise AppendOnlyError("QueryLog rows are written only by generation.audit_chain.query_record()")
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> tuple[int, dict[str, int]]:
        raise AppendOnlyError("QueryLog rows cannot be deleted")


class QueryFeedback(models.Model):
    """A reader's verdict on an answer; kept beside the immutable log row, newest wins."""

    class Verdict(models.TextChoices):
        CORRECT = "correct", gettext_noop("Correct")
        INCORRECT = "incorrect", gettext_noop("Incorrect")

    query = models.ForeignKey(QueryLog, on_delete=models.PROTECT, related_name="feedback")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL)
    verdict = models.CharField(max_length=10, choices=Verdict.choices)
    note = models.TextField(blank=True, max_length=4000)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        db_table = "retrieval_queryfeedback"
        ordering = ["-created_at"]
