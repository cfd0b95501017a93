"""Pages: ask a question in a conversation (plain form, or streamed verified sentences with JS), generation runs."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

from django.conf import settings
from django.core.paginator import Paginator
from django.db.models import Count
from django.http import FileResponse, Http404, HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import translation
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from core.config import EXTRACTIVE
from core.ratelimit import RateLimited
from generation import selectors
from core import llm
from generation.answers import MAX_QUESTION_CHARS, QueryError, QueryFailed
from generation.asking import ConversationNotFound, Turn, query_answer, turn_admit, turn_answer
from generation.forms import AskForm
from generation.models import Conversation, GenerationRun, QueryLog
from generation.streaming import Emit, run_streamed
from generation.present import access_context, answer_context, document_html, footnote_links
from generation.querylog.selectors import (
    conversation_turns,
    may_give_feedback,
    own_conversations,
    sees_every_query,
    visible_conversations,
    visible_queries,
)
from sources.vectorstore import MissingEmbeddings

logger = logging.getLogger(__name__)

STAGES = {
    "retrieving": _("Retrieving sources"),
    "generating": _("Writing the answer"),
    "checking": _("Checking every sentence against the sources"),
}
READER_STAGES = {"retrieving": _("Retrieving sources"), "reading": _("Choosing the sentences to quote")}


def stages() -> dict[str, str]:
    """The stages an answer goes through with the configured ``generation.model``."""
    chosen = READER_STAGES if settings.FOUNDRY.generation.model == EXTRACTIVE else STAGES
    return {key: str(label) for key, label in chosen.items()}  # in the active language


@require_http_methods(["GET", "POST"])
def ask(request: HttpRequest) -> HttpResponse:
    """GET: the question box of a new conversation. POST (works without JavaScript): answer, then show the
    new conversation (post/redirect/get)."""
    if request.method == "GET":
        return _render_ask(request, AskForm())
    return _ask_post(request, conversation=None)


@require_http_methods(["GET", "POST"])
def conversation(request: HttpRequest, conversation_id: int) -> HttpResponse:
    """GET: a conversation's turns, oldest first, and (for its owner) the box for a follow-up. POST: ask it."""
    chat = get_object_or_404(visible_conversations(request.user), pk=conversation_id)
    if request.method == "GET":
        return _render_ask(request, AskForm(), conversation=chat)
    if chat.owner_id != request.user.pk:  # an auditor reads other people's conversations, never adds to them
        raise Http404("No such conversation.")
    return _ask_post(request, conversation=chat)


def _ask_post(request: HttpRequest, *, conversation: Conversation | None) -> HttpResponse:
    form = AskForm(request.POST)
    if not form.is_valid():
        return _render_ask(request, form, conversation=conversation, status=400)
    try:
        _, row = query_answer(
            user=request.user,
            question=form.cleaned_data["question"],
            conversation_id=conversation.pk if conversation else None,
        )
    except RateLimited as exc:
        response = _render_ask(request, form, conversation=conversation, error=str(exc), status=429)
        response["Retry-After"] = str(exc.retry_after)
        return response
    except QueryError as exc:
        form.add_error("question", str(exc))
        return _render_ask(request, form, conversation=conversation, status=400)
    except (QueryFailed, MissingEmbeddings, llm.LLMError) as exc:
        return _render_ask(request, form, conversation=conversation, error=str(exc), status=503)
    return redirect(_turn_url(row))


def _turn_url(row: QueryLog) -> str:
    return f"{reverse('conversation', args=[row.conversation_id])}#turn-{row.pk}"


@require_GET
def ask_result(request: HttpRequest, query_id: int) -> HttpResponse:
    row = get_object_or_404(visible_queries(request.user), pk=query_id)
    return _render_ask(request, AskForm(initial={"question": row.question}), row=row)


CONVERSATION_PAGE_SIZE = 25


@require_GET
def conversation_list(request: HttpRequest) -> HttpResponse:
    """Your conversations, the one with the latest turn first (auditors: everyone's)."""
    rows = visible_conversations(request.user).annotate(turn_count=Count("turns"))
    page = Paginator(rows, CONVERSATION_PAGE_SIZE).get_page(request.GET.get("page"))
    return render(request, "ask/conversations.html", {"page": page, "everyone": sees_every_query(request.user)})


def _render_ask(
    request: HttpRequest,
    form: AskForm,
    *,
    row: QueryLog | None = None,
    conversation: Conversation | None = None,
    error: str = "",
    status: int = 200,
) -> HttpResponse:
    user = request.user
    assert user.is_authenticated  # LoginRequiredMiddleware lets only signed-in users reach the ask pages
    # select_related(None): visible_queries() joins the user, which .only() would defer (a FieldError).
    recent = (
        visible_queries(user)
        .filter(user=user)
        .select_related(None)
        .only("pk", "question", "message", "created_at")
        .order_by("-created_at", "-pk")[:6]
    )
    conversations = own_conversations(request.user)[:6]
    context: dict[str, Any] = {
        "form": form,
        "max_question_chars": f"{MAX_QUESTION_CHARS:,}",
        "error": error,
        "recent": recent,
        "stages": stages(),
        "conversation": conversation,
        "conversations": conversations,
        "turns": [],
        "may_ask": conversation is None or conversation.owner_id == request.user.pk,
        **access_context(request.user),
    }
    if conversation is not None:
        context["turns"] = _turns_html(request, conversation)
    if row is not None:
        context.update(answer_context(row, request.user), may_feedback=may_give_feedback(request.user, row))
    return render(request, "ask/ask.html", context, status=status)


def _turns_html(request: HttpRequest, chat: Conversation) -> list[tuple[int, str]]:
    """(query id, rendered answer) per turn, oldest first; the latest keeps the plain element ids."""
    rows = list(conversation_turns(chat, request.user))
    return [
        (row.pk, _answer_html(request, row, anchor="" if i == len(rows) - 1 else f"t{row.pk}-"))
        for i, row in enumerate(rows)
    ]


def _answer_html(request: HttpRequest, row: QueryLog, *, anchor: str = "") -> str:
    context = {**answer_context(row, request.user, anchor=anchor), "may_feedback": may_give_feedback(request.user, row)}
    return render_to_string("ask/_answer.html", context, request=request)


@require_POST
def ask_stream(request: HttpRequest) -> HttpResponse | StreamingHttpResponse:
    """The same question as a POST, answered as a text/event-stream: stages, each verified sentence, the answer.

    Design rule: a sentence is sent only once it has passed its check against the sources (the
    extractive reader's quotes are verbatim, so as soon as they are chosen; a model's sentences after
    grounding), never model tokens as they are produced: streaming raw tokens would show text the
    grounding check may still remove. The last event is the finished answer, rendered as on the page.
    ``conversation`` (optional) is the id of one of your conversations: the question is its follow-up.
    (POST with the CSRF token rather than EventSource's GET, because asking costs a query and leaves
    an audit row.)
    """
    try:
        turn = turn_admit(
            user=request.user,
            question=request.POST.get("question", ""),
            conversation_id=_conversation_id(request.POST.get("conversation", "")),
        )
    except ConversationNotFound as exc:
        return JsonResponse({"detail": str(exc)}, status=404)
    except RateLimited as exc:
        return JsonResponse({"detail": str(exc)}, status=429, headers={"Retry-After": str(exc.retry_after)})
    except QueryError as exc:
        return JsonResponse({"detail": str(exc)}, status=400)
    response = StreamingHttpResponse(_answer_events(request, turn), content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    return response


def _conversation_id(value: str) -> int | None:
    if not value.strip():
        return None
    if not value.strip().isdigit() or len(value.strip()) > 18:
        raise QueryError(f"conversation: {value[:40]!r} is not a conversation id (a positive whole number).")
    return int(value)


def _answer_events(request: HttpRequest, turn: Turn) -> Iterator[str]:
    interface = translation.get_language()  # the worker thread answers in the request's language, as the page does

    def work(emit: Emit) -> int:
        with translation.override(interface):
            _, row = turn_answer(
                user=request.user,
                turn=turn,
                progress=lambda stage: emit("stage", stage),
                on_sentence=lambda text: emit("sentence", text),
            )
        return row.pk

    for event in run_streamed(work):
        if event.kind == "keepalive":
            yield ": keep-alive\n\n"
        elif event.kind == "stage":
            yield _sse("stage", {"stage": event.value, "label": stages().get(event.value, event.value)})
        elif event.kind == "sentence":
            yield _sse("sentence", {"text": event.value})
        elif event.kind == "done":
            row = visible_queries(request.user).get(pk=event.value)
            yield _sse(
                "answer",
                {
                    "html": _answer_html(request, row),
                    "url": _turn_url(row),
                    "query_id": row.pk,
                    "conversation_id": row.conversation_id,
                    "title": row.conversation.title if row.conversation else "",  # cut to fit, as the page shows it
                    "meta": render_to_string(
                        "ask/_conversation_meta.html", {"conversation": row.conversation}, request=request
                    ),
                },
            )
        else:
            yield _sse("error", {"detail": _error_text(event.value)})


def _error_text(exc: BaseException) -> str:
    if isinstance(exc, (QueryError, QueryFailed, MissingEmbeddings, llm.LLMError)):
        return str(exc)
    logger.error("streamed query failed", exc_info=exc)
    return "The query failed unexpectedly; the error is in the server log."


def _sse(event: str, data: dict) -> str:
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"


RUN_PAGE_SIZE = 25


@require_GET
def run_list(request: HttpRequest) -> HttpResponse:
    runs = selectors.visible_runs(request.user).defer("prompt", "spec_body", "chunks")
    page = Paginator(runs, RUN_PAGE_SIZE).get_page(request.GET.get("page"))
    return render(request, "runs/list.html", {"page": page, "everyone": selectors.sees_every_run(request.user)})


# The stages a run goes through, as the run page lists them (``stage`` on the run; "" is queued).
RUN_STAGES = {
    "queued": _("Queued"),
    "retrieval": _("Retrieving sources"),
    "reading": _("Choosing the passages to quote"),
    "generate": _("Writing the document"),
    "grounding": _("Checking every sentence"),
    "done": _("Done"),
}


def run_stages(run: GenerationRun) -> dict[str, str]:
    """The stages of ``run``'s writer, in order: the extractive writer reads; a model writes, then is checked."""
    writer = (run.models_used or {}).get("generation") or settings.FOUNDRY.generation.model
    names = ["queued", "retrieval", *(["reading"] if writer == EXTRACTIVE else ["generate", "grounding"]), "done"]
    return {name: str(RUN_STAGES[name]) for name in names}


def review_reason(run: GenerationRun) -> str:
    """Why a run needs review, in words: what its low confidence means for its writer."""
    if run.status != GenerationRun.Status.NEEDS_REVIEW:
        return ""
    if (run.grounding or {}).get("writer") == EXTRACTIVE:
        return "more than half of the spec's sections had nothing in the sources close enough to quote"
    return (
        f"only {run.sentences_kept} of the {run.sentences_total} sentences the model wrote are supported by "
        "the sources, fewer than generation.min_coverage asks"
    )


@require_GET
def run_detail(request: HttpRequest, run_id: int) -> HttpResponse:
    run = get_object_or_404(selectors.visible_runs(request.user), pk=run_id)
    document = selectors.run_document(run)
    html = None
    if document is not None:
        chunk_ids = [c["chunk_id"] for c in run.chunks if isinstance(c, dict) and "chunk_id" in c]
        html = document_html(document, footnote_links(document, chunk_ids, request.user))
    stages, stage = run_stages(run), run.stage or "queued"
    order = list(stages)
    now = order.index(stage) if stage in order else -1
    steps = [
        (name, label, "active" if i == now else "past" if i < now else "")
        for i, (name, label) in enumerate(stages.items())
    ]
    return render(
        request,
        "runs/detail.html",
        {
            "run": run,
            "done": run.is_finished,
            "document_html": html,
            "downloadable": document is not None,
            "steps": steps,
            "stage_label": stages.get(stage, stage),
            "review_reason": review_reason(run),
            "show_grounding": selectors.may_review_grounding(request.user),
        },
    )


@require_GET
def run_status(request: HttpRequest, run_id: int) -> JsonResponse:
    """What the run page polls: status (and its label) and stage."""
    run = get_object_or_404(selectors.visible_runs(request.user).only("pk", "status", "stage", "created_by"), pk=run_id)
    return JsonResponse(
        {
            "id": run.pk,
            "status": run.status,
            "label": gettext(run.get_status_display()),  # as the page shows it
            "stage": run.stage,
            "done": run.is_finished,
        }
    )


@require_GET
def run_download(request: HttpRequest, run_id: int) -> FileResponse:
    """The run's Markdown as an attachment, or 404 (not finished, missing, or outside the outputs folder)."""
    run = get_object_or_404(selectors.visible_runs(request.user), pk=run_id)
    path = selectors.run_output_file(run)
    if path is None:
        raise Http404("This run has no downloadable document.")
    return FileResponse(
        path.open("rb"),
        as_attachment=True,
        filename=selectors.run_download_name(run),
        content_type="text/markdown; charset=utf-8",
    )
