"""Reads over the query log: who may see which rows, the browser's filters, the dashboard's numbers.

Visibility: a user sees only the rows of their own queries. A row records answers
drawn from the asker's collections at the time they asked, so a user only ever sees
rows about sources they could read then. Seeing everyone's rows, including answers
and citations from collections the viewer is not a reader of, takes the audit
permission ``generation.view_querylog`` (superusers hold every permission). Staff
status alone grants nothing here: it only opens the admin, and a spec reviewer is
staff without being an auditor.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import CharField, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Cast
from django.utils import timezone

from generation.models import Conversation, QueryFeedback, QueryLog

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations

FEEDBACK_CHOICES = ("correct", "incorrect", "none")
AUDIT_PERMISSION = "generation.view_querylog"
_Row = TypeVar("_Row", bound=QueryLog)


def sees_every_query(user: User | AnonymousUser) -> bool:
    """True when ``user`` may read every user's query-log rows (the audit permission, or a superuser)."""
    return bool(user.is_authenticated and user.is_active and user.has_perm(AUDIT_PERMISSION))


def may_review_grounding(user: User | AnonymousUser) -> bool:
    """Whether pages show the grounding check's verdicts, with the text it withheld, on rows ``user`` sees.

    The asker never sees withheld text; staff (on their own rows) and auditors review it.
    """
    return bool(user.is_authenticated and user.is_active and (user.is_staff or sees_every_query(user)))


class Verdict(TypedDict):
    """What ``visible_queries`` adds to each row: the newest feedback verdict, None without feedback."""

    verdict: str | None


def visible_queries(user: User | AnonymousUser) -> QuerySet[WithAnnotations[QueryLog, Verdict]]:
    """The query-log rows ``user`` may read, each annotated with its newest feedback verdict."""
    newest = QueryFeedback.objects.filter(query=OuterRef("pk")).order_by("-created_at", "-pk").values("verdict")[:1]
    rows = QueryLog.objects.select_related("user").annotate(verdict=Subquery(newest))
    if not user.is_authenticated or not user.is_active:
        return rows.none()
    return rows if sees_every_query(user) else rows.filter(user=user)


def may_give_feedback(user: User | AnonymousUser, row: QueryLog) -> bool:
    """Only the person who asked, or a staff auditor (who may read every row), judge an answer."""
    if not user.is_authenticated or not user.is_active:
        return False
    return row.user_id == user.pk or (user.is_staff and sees_every_query(user))


@dataclass(frozen=True)
class QueryFilters:
    """The query-log browser's filters; empty values filter nothing."""

    user: str = ""  # a username; honoured only for viewers who see every row
    date_from: date | None = None
    date_to: date | None = None
    answer_class: str = ""
    collection: int | None = None  # rows whose search scope included this collection id
    feedback: str = ""  # correct | incorrect | none (newest verdict)
    q: str = ""  # text in the question or the answer


def queries_filter(
    rows: QuerySet[WithAnnotations[QueryLog, Verdict]], filters: QueryFilters, *, viewer: Any
) -> QuerySet[WithAnnotations[QueryLog, Verdict]]:
    """Apply ``filters`` to rows from ``visible_queries`` (newest first)."""
    if filters.user and sees_every_query(viewer):
        rows = rows.filter(user__username=filters.user)
    if filters.date_from:
        rows = rows.filter(created_at__date__gte=filters.date_from)
    if filters.date_to:
        rows = rows.filter(created_at__date__lte=filters.date_to)
    if filters.answer_class:
        rows = rows.filter(answer_class=filters.answer_class)
    if filters.collection is not None:
        rows = _in_scope(rows, filters.collection)
    if filters.feedback == "none":
        # django-stubs checks a lookup on an annotation against the annotation's own type, even
        # when the lookup (isnull) takes a bool.
        rows = rows.filter(verdict__isnull=True)  # type: ignore[misc]
    elif filters.feedback:
        rows = rows.filter(verdict=filters.feedback)
    if filters.q:
        rows = rows.filter(Q(question__icontains=filters.q) | Q(answer__icontains=filters.q))
    return rows.order_by("-created_at", "-pk")


def _in_scope(rows: QuerySet[_Row], collection_id: int) -> QuerySet[_Row]:
    # SQLite has no JSON "contains" lookup in Django, so match the stored JSON
    # text ("[1, 7]"). NULL is a superuser's query over every collection.
    text = Cast("collection_ids", CharField())
    return rows.annotate(scope_text=text).filter(
        Q(scope_text__regex=rf"[\[ ,]{int(collection_id)}[,\]]") | Q(collection_ids__isnull=True)
    )


@dataclass
class DayCount:
    day: date
    total: int = 0
    refused: int = 0


@dataclass
class Dashboard:
    days: list[DayCount] = field(default_factory=list)
    total: int = 0
    refusal_share: float | None = None
    mean_coverage: float | None = None
    p50_ms: float | None = None
    p95_ms: float | None = None
    failed: int = 0


def dashboard_stats(rows: QuerySet[QueryLog], *, days: int = 30, today: date | None = None) -> Dashboard:
    """Per-day counts over the last ``days`` days, refusal share, mean coverage and latency percentiles."""
    today = today or timezone.localdate()
    first = today - timedelta(days=days - 1)
    # Searches (MCP ``search``) return passages, not answers: they would dilute the refusal share.
    answers = rows.filter(created_at__date__gte=first).exclude(kind=QueryLog.Kind.SEARCH)
    values = answers.values_list("created_at", "answer_class", "coverage", "timings", "status")
    by_day = {first + timedelta(days=n): DayCount(first + timedelta(days=n)) for n in range(days)}
    stats = Dashboard(days=list(by_day.values()))
    coverages, latencies = [], []
    for created, answer_class, coverage, timings, status in values.iterator():
        day = by_day.get(timezone.localtime(created).date())
        if day is None:
            continue
        day.total += 1
        stats.total += 1
        if status == QueryLog.Status.FAILED:
            stats.failed += 1
        if answer_class == QueryLog.AnswerClass.NO_EVIDENCE:
            day.refused += 1
        if coverage is not None:
            coverages.append(coverage)
        if isinstance(timings, dict) and isinstance(timings.get("total"), (int, float)):
            latencies.append(float(timings["total"]))
    answered = stats.total - stats.failed
    stats.refusal_share = sum(d.refused for d in stats.days) / answered if answered else None
    stats.mean_coverage = statistics.fmean(coverages) if coverages else None
    stats.p50_ms, stats.p95_ms = percentile(latencies, 50), percentile(latencies, 95)
    return stats


def percentile(values: list[float], pct: float) -> float | None:
    """Nearest-rank percentile (no interpolation): a value that really occurred."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * pct // 100))  # ceil without floats drifting
    return ordered[int(rank) - 1]


def visible_conversations(user: User | AnonymousUser) -> QuerySet[Conversation]:
    """The conversations ``user`` may read, recent first: their own, or everyone's with the audit permission
    (the rule of ``visible_queries``)."""
    if not user.is_authenticated or not user.is_active:
        return Conversation.objects.none()
    rows = Conversation.objects.select_related("owner", "collection").order_by("-updated_at", "-pk")
    return rows if sees_every_query(user) else rows.filter(owner=user)


def own_conversations(user: User | AnonymousUser) -> QuerySet[Conversation]:
    """The conversations ``user`` may ask in: only their own (an auditor reads others', never adds to them)."""
    if not user.is_authenticated or not user.is_active:
        return Conversation.objects.none()
    return Conversation.objects.filter(owner=user).order_by("-updated_at", "-pk")


def conversation_turns(conversation: Conversation, viewer: User | AnonymousUser) -> QuerySet[QueryLog]:
    """The turns of ``conversation`` that ``viewer`` may read (``visible_queries``), oldest first."""
    return visible_queries(viewer).filter(conversation=conversation).order_by("created_at", "pk")
