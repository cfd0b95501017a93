"""Asking on behalf of a signed-in user: rate limit, row-level scope, then ``answer_logged``.

The ask page, its streaming variant and ``POST /api/v1/query`` all come through here,
so every way in is limited and scoped the same way. Every question is a turn of a
conversation (a new one unless the caller names one of theirs); a follow-up is made
standalone from the earlier turns (generation/condense/) before retrieval, so the gate
and grounding see exactly what they would see for a question asked on its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import transaction

from core.ratelimit import rate_limit_enforce
from generation.answers import Answer, Asked, Progress, QueryError, Sentences, answer_logged, question_clean
from generation.condense import question_standalone
from generation.reader import stored_quotes
from generation.conversations import conversation_discard_if_empty, conversation_start, conversation_touch
from generation.models import Conversation, QueryLog
from generation.querylog.selectors import own_conversations
from sources.selectors import query_scope

NO_COLLECTIONS = "You cannot read any collection yet, so there is nothing to search. Ask an administrator for access."
LOST_COLLECTION = (
    "conversation_id: this conversation searches the collection {name}, which you can no longer "
    "read. Start a new conversation."
)
OTHER_COLLECTION = (
    "collection: a follow-up searches its conversation's collection ({name}); leave collection out "
    "or start a new conversation."
)


class ConversationNotFound(LookupError):
    """No conversation of the caller's has that id (someone else's looks the same: it does not exist)."""


def query_admit(*, user: Any) -> list[int] | None:
    """Count one query against ``user``'s rate limit and return the collections it may search.

    Raises ``RateLimited`` over the limit and ``QueryError`` when the user can read nothing.
    """
    rate_limit_enforce(user.pk)
    scope = query_scope(user)
    if scope == []:
        raise QueryError(NO_COLLECTIONS)
    return scope


@dataclass(frozen=True)
class Turn:
    """An admitted question, not yet answered: the asker's words, the conversation (None: a new one) and scope."""

    message: str
    conversation: Conversation | None
    scope: list[int] | None
    within: int | None


def turn_admit(*, user: Any, question: str, within: int | None = None, conversation_id: int | None = None) -> Turn:
    """Check everything that can refuse the question before any work: the conversation is ``user``'s
    (``ConversationNotFound``), the question is usable and the scope fits it (``QueryError``), and the rate
    limit (``RateLimited``, counted once here)."""
    conversation = _own(user, conversation_id)
    message = question_clean(question)
    scope = query_admit(user=user)
    if conversation is not None:
        scope = _conversation_scope(conversation, scope, within)
    elif within is not None:
        scope = [within]
    return Turn(message, conversation, scope, within)


def turn_answer(
    *,
    user: Any,
    turn: Turn,
    mode: str | None = None,
    top_k: int | None = None,
    progress: Progress | None = None,
    on_sentence: Sentences | None = None,
) -> tuple[Answer, QueryLog]:
    """Answer an admitted turn and return the answer with its query-log row (a turn of its conversation).

    A follow-up is made standalone from the earlier turns' messages first. A new conversation whose first
    question fails before anything is logged is not kept.
    """
    conversation = turn.conversation
    earlier: list[QueryLog] = []
    if conversation is not None:
        earlier = list(conversation.turns.order_by("created_at", "pk"))
        condensed = question_standalone(
            message=turn.message,
            history=[t.message or t.question for t in earlier],
            collection_ids=turn.scope,
            standalone=[t.question for t in earlier],
        )
    else:
        condensed = question_standalone(message=turn.message, history=[])
        conversation = conversation_start(owner=user, question=turn.message, collection_id=turn.within)
    asked = Asked(
        user=user,
        collection_ids=turn.scope,
        message=condensed.message if condensed.rewritten else "",
        conversation=conversation,
        quoted=stored_quotes(prior.grounding) if (prior := condensed.follows(earlier)) else (),
    )
    try:
        answer, row = answer_logged(
            condensed.question, asked=asked, mode=mode, top_k=top_k, progress=progress, on_sentence=on_sentence
        )
    except BaseException:
        if turn.conversation is None:
            with transaction.atomic():
                conversation_discard_if_empty(conversation=conversation)
        raise
    conversation_touch(conversation=conversation)
    return answer, row


def query_answer(
    *,
    user: Any,
    question: str,
    mode: str | None = None,
    top_k: int | None = None,
    within: int | None = None,
    conversation_id: int | None = None,
    progress: Progress | None = None,
) -> tuple[Answer, QueryLog]:
    """Admit (``turn_admit``), answer (``turn_answer``) within the user's collections (or ``within``, one of
    them), as a turn of conversation ``conversation_id`` (one of ``user``'s) or of a new one."""
    turn = turn_admit(user=user, question=question, within=within, conversation_id=conversation_id)
    return turn_answer(user=user, turn=turn, mode=mode, top_k=top_k, progress=progress)


def _own(user: Any, conversation_id: int | None) -> Conversation | None:
    if conversation_id is None:
        return None
    conversation = own_conversations(user).select_related("collection").filter(pk=conversation_id).first()
    if conversation is None:
        raise ConversationNotFound(f"conversation_id: you have no conversation {conversation_id}.")
    return conversation


def _conversation_scope(conversation: Conversation, scope: list[int] | None, within: int | None) -> list[int] | None:
    """The collections a follow-up searches: the conversation's one collection if it has one (still readable),
    else all the owner can read now."""
    if conversation.collection_id is None:
        if within is not None:
            raise QueryError(OTHER_COLLECTION.format(name="every collection you can read"))
        return scope
    if within is not None and within != conversation.collection_id:
        raise QueryError(OTHER_COLLECTION.format(name=str(conversation.collection)))
    if scope is not None and conversation.collection_id not in scope:
        raise QueryError(LOST_COLLECTION.format(name=str(conversation.collection)))
    return [conversation.collection_id]
