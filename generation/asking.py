"""Asking on behalf of a signed-in user: rate limit, row-level scope, then ``answer_question``.

The ask page, its streaming variant and ``POST /api/v1/query`` all come through here,
so every way in is limited and scoped the same way.
"""
from __future__ import annotations

from typing import Any

from foundry_site.core.ratelimit import rate_limit_enforce
from generation.answers import Answer, Progress, QueryError, answer_question
from retrieval.models import QueryLog
from sources.selectors import query_scope

NO_COLLECTIONS = "You cannot read any collection yet, so there is nothing to search. Ask an administrator for access."


def query_admit(*, user: Any) -> list[int] | None:
    """Count one query against ``user``'s rate limit and return the collections it may search.

    Raises ``RateLimited`` over the limit and ``QueryError`` when the user can read nothing.
    """
    rate_limit_enforce(user.pk)
    scope = query_scope(user)
    if scope == []:
        raise QueryError(NO_COLLECTIONS)
    return scope


def query_answer(*, user: Any, question: str, mode: str | None = None, top_k: int | None = None,
                 within: int | None = None, progress: Progress | None = None) -> tuple[Answer, QueryLog]:
    """Admit, answer within the user's collections (or ``within``, one of them), and return the answer
    with its query-log row."""
    scope = query_admit(user=user)
    if within is not None:
        scope = [within]
    answer = answer_question(question=question, user=user, collection_ids=scope, mode=mode, top_k=top_k,
                             progress=progress)
    return answer, QueryLog.objects.get(run_id=answer.run_id)
