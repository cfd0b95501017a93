"""Readers' verdicts on answers, kept beside the immutable query-log row."""

from __future__ import annotations

from typing import Any

from core.text import unpaired_surrogates
from generation.models import QueryFeedback, QueryLog

MAX_NOTE = 4000


class FeedbackError(ValueError):
    """The feedback itself is invalid (unknown verdict, note too long)."""


def feedback_record(*, query: QueryLog, user: Any, verdict: str, note: str = "") -> QueryFeedback:
    """Store a verdict (correct/incorrect) with an optional note. Access is the caller's check.

    Verdicts are kept as a history, the newest of each user counting; the same verdict and note again as that
    user's newest is that row, not a second one."""
    if verdict not in QueryFeedback.Verdict.values:
        raise FeedbackError(f"verdict must be one of {', '.join(QueryFeedback.Verdict.values)}, not {verdict!r}")
    if unpaired_surrogates(note):
        raise FeedbackError("the note contains characters that are not valid Unicode (unpaired surrogates)")
    note = note.replace("\x00", "").strip()
    if len(note) > MAX_NOTE:
        raise FeedbackError(f"the note is {len(note)} characters long; the limit is {MAX_NOTE}")
    user = user if getattr(user, "is_authenticated", False) else None
    newest = query.feedback.filter(user=user).order_by("-created_at", "-pk").first() if user else None
    if newest is not None and (newest.verdict, newest.note) == (verdict, note):
        return newest
    return QueryFeedback.objects.create(query=query, user=user, verdict=verdict, note=note)
