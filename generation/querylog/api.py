"""``/api/v1/query-log``: the caller's query-log rows (auditors: everyone's) and feedback on them."""
# No ``from __future__ import annotations``: django-ninja reads these signatures at runtime.

from django.db.models import QuerySet
from django.shortcuts import get_object_or_404
from ninja import Query, Router
from ninja.errors import HttpError
from ninja.pagination import paginate

from core.pagination import PageNumberPagination
from core.requests import ApiRequest
from core.schemas import RowId
from generation.models import QueryFeedback, QueryLog
from generation.querylog import selectors
from generation.querylog.feedback import feedback_record
from generation.querylog.schemas import FeedbackIn, FeedbackOut, QueryLogDetailOut, QueryLogFilter, QueryLogRowOut
from sources.models import Collection
from sources.schemas import ErrorOut
from sources.selectors import readable_collections

router = Router(tags=["query log"])

# The operation ids of the published OpenAPI document: generated clients name their methods after them.
OPERATION_IDS = {
    "list": "retrieval_api_list_queries",
    "get": "retrieval_api_get_query",
    "feedback": "retrieval_api_give_feedback",
}

ERRORS = {401: ErrorOut, 404: ErrorOut}


@router.get("/query-log", response=list[QueryLogRowOut], operation_id=OPERATION_IDS["list"])
@paginate(PageNumberPagination, page_size=50)
def list_queries(request: ApiRequest, filters: Query[QueryLogFilter]) -> QuerySet[QueryLog]:
    """Query-log rows, newest first, filtered by user (auditors), dates, answer class, collection, feedback, text."""
    user = request.auth
    collection_id = None
    if filters.collection:
        visible = Collection.objects.all() if selectors.sees_every_query(user) else readable_collections(user)
        collection_id = visible.filter(name=filters.collection).values_list("pk", flat=True).first() or -1
    chosen = selectors.QueryFilters(
        user=filters.user or "",
        date_from=filters.date_from,
        date_to=filters.date_to,
        answer_class=filters.answer_class or "",
        collection=collection_id,
        feedback=filters.feedback or "",
        q=(filters.q or "").strip(),
    )
    return selectors.queries_filter(selectors.visible_queries(user), chosen, viewer=user).defer(
        "channels", "hyde_text", "gate", "conflicts", "citations", "answer"
    )


@router.get("/query-log/{query_id}", response={200: QueryLogDetailOut, **ERRORS}, operation_id=OPERATION_IDS["get"])
def get_query(request: ApiRequest, query_id: RowId) -> QueryLog:
    """One row in full: answer, citations, chunks per channel with scores, gate, timings, tokens, feedback."""
    return get_object_or_404(selectors.visible_queries(request.auth), pk=query_id)


@router.post(
    "/query-log/{query_id}/feedback",
    response={201: FeedbackOut, 400: ErrorOut, **ERRORS},
    operation_id=OPERATION_IDS["feedback"],
)
def give_feedback(request: ApiRequest, query_id: RowId, body: FeedbackIn) -> tuple[int, QueryFeedback]:
    """Record a verdict (correct | incorrect) with an optional note. Only the asker or a staff auditor may."""
    row = get_object_or_404(selectors.visible_queries(request.auth), pk=query_id)
    if not selectors.may_give_feedback(request.auth, row):
        raise HttpError(404, "Not Found")
    return 201, feedback_record(query=row, user=request.auth, verdict=body.verdict, note=body.note)
