"""Starting conversations and keeping their "latest turn" time. Their turns are QueryLog rows."""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from generation.models import Conversation

TITLE_CHARS = 200


def conversation_title(question: str) -> str:
    """The first question on one line, cut at a word boundary to fit ``TITLE_CHARS`` (with an ellipsis)."""
    text = " ".join(question.split())
    if len(text) <= TITLE_CHARS:
        return text
    cut = text[: TITLE_CHARS - 1].rsplit(" ", 1)[0] or text[: TITLE_CHARS - 1]
    return cut + "…"


def conversation_start(*, owner: Any, question: str, collection_id: int | None = None) -> Conversation:
    """A new, empty conversation of ``owner`` titled after its first ``question``; scoped to one collection
    when ``collection_id`` is set (the caller checks that ``owner`` may read it)."""
    return Conversation.objects.create(owner=owner, title=conversation_title(question), collection_id=collection_id)


def conversation_touch(*, conversation: Conversation) -> None:
    """Mark a turn as just asked (the list of conversations is ordered by it)."""
    now = timezone.now()
    Conversation.objects.filter(pk=conversation.pk).update(updated_at=now)
    conversation.updated_at = now


def conversation_discard_if_empty(*, conversation: Conversation) -> None:
    """Remove a conversation that got no turn (its first question failed before anything was logged)."""
    if not conversation.turns.exists():
        conversation.delete()
