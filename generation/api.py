"""``POST /api/v1/query`` and the generation runs (read, download). Scoped to the caller.

Domain errors become status codes in ``foundry_site/api.py``: 400 bad question,
429 rate limit (with Retry-After), 503 model or embeddings unavailable.
"""
# No ``from __future__ import annotations``: django-ninja reads these signatures at runtime.

from django.db.models import QuerySet
from django.http import FileResponse
from django.shortcuts import get_object_or_404
from ninja import Router
from ninja.errors import HttpError
from ninja.pagination import paginate

from core.pagination import PageNumberPagination
from core.requests import ApiRequest
from core.schemas import RowId
from generation import selectors
from generation.asking import query_answer
from generation.models import Conversation, GenerationRun
from generation.querylog.selectors import visible_conversations
from generation.schemas import ConversationDetailOut, ConversationOut, QueryIn, QueryOut, RunOut
from sources.schemas import ErrorOut
from sources.selectors import readable_collections

router = Router(tags=["query", "generation"])

ERRORS = {401: ErrorOut, 404: ErrorOut}


@router.post(
    "/query", response={200: QueryOut, 400: ErrorOut, 401: ErrorOut, 404: ErrorOut, 429: ErrorOut, 503: ErrorOut}
)
def query(request: ApiRequest, body: QueryIn) -> dict:
    """Answer a question from the collections the caller can read, or refuse (answer_class no_evidence).

    Every question is a turn of a conversation: send the ``conversation_id`` of an earlier answer to ask a
    follow-up ("and its voltage?"), which is made standalone from the earlier turns before retrieval;
    ``question`` in the reply is what was answered. Someone else's conversation id is 404.

    The answer is returned only after its grounding check; citations carry the chunk text.
    """
    within = None
    if body.collection is not None:  # one of the caller's collections; any other name is 404, as elsewhere
        within = get_object_or_404(readable_collections(request.auth), name=body.collection).pk
    answer, row = query_answer(
        user=request.auth,
        question=body.question,
        mode=body.mode,
        top_k=body.top_k,
        within=within,
        conversation_id=body.conversation_id,
    )
    return {**answer.as_dict(), "query_id": row.pk, "conversation_id": row.conversation_id}


@router.get("/conversations", response=list[ConversationOut])
@paginate(PageNumberPagination, page_size=25)
def list_conversations(request: ApiRequest) -> QuerySet[Conversation]:
    """The caller's conversations, the one with the latest turn first (auditors: everyone's)."""
    return visible_conversations(request.auth)


@router.get("/conversations/{conversation_id}", response={200: ConversationDetailOut, **ERRORS})
def get_conversation(request: ApiRequest, conversation_id: RowId) -> Conversation:
    """One conversation with its turns, oldest first: each question as typed, as answered, and its answer."""
    return get_object_or_404(visible_conversations(request.auth), pk=conversation_id)


@router.get("/runs", response=list[RunOut])
@paginate(PageNumberPagination, page_size=25)
def list_runs(request: ApiRequest) -> QuerySet[GenerationRun]:
    """The caller's generation runs, newest first (auditors: everyone's)."""
    return selectors.visible_runs(request.auth).defer("prompt", "spec_body", "chunks")


@router.get("/runs/{run_id}", response={200: RunOut, **ERRORS})
def get_run(request: ApiRequest, run_id: RowId) -> GenerationRun:
    """Status, stage, conflicts and coverage of one run; ``download`` is set once the document can be fetched."""
    return get_object_or_404(selectors.visible_runs(request.auth), pk=run_id)


@router.get("/runs/{run_id}/download", response={200: None, **ERRORS}, url_name="run_download")
def download_run(request: ApiRequest, run_id: RowId) -> FileResponse:
    """The generated Markdown file (attachment). 404 until the run has succeeded."""
    run = get_object_or_404(selectors.visible_runs(request.auth), pk=run_id)
    path = selectors.run_output_file(run)
    if path is None:
        raise HttpError(404, "This run has no downloadable document.")
    return FileResponse(
        path.open("rb"),
        as_attachment=True,
        filename=selectors.run_download_name(run),
        content_type="text/markdown; charset=utf-8",
    )
