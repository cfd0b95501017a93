"""Pages: ask a question (plain form, or streamed stages with JS), generation runs and their documents."""
from __future__ import annotations

import json
import logging
import queue
import threading
from collections.abc import Iterator
from typing import Any

from django.conf import settings
from django.core.paginator import Paginator
from django.db import connections
from django.http import FileResponse, Http404, HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from foundry_site.config import EXTRACTIVE
from foundry_site.ratelimit import RateLimited
from generation import selectors
from generation.answers import QueryError, QueryFailed, answer_question, question_clean
from generation.asking import query_admit, query_answer
from generation.forms import AskForm
from generation.models import GenerationRun
from generation.present import access_context, answer_context, document_html, footnote_links
from retrieval.models import QueryLog
from retrieval.selectors import may_give_feedback, visible_queries
from sources.vectorstore import MissingEmbeddings

logger = logging.getLogger(__name__)

STAGES = {"retrieving": "Retrieving sources", "generating": "Writing the answer",
          "checking": "Checking every sentence against the sources"}
READER_STAGES = {"retrieving": "Retrieving sources", "reading": "Choosing the sentences to quote"}


def stages() -> dict[str, str]:
    """The stages an answer goes through with the configured ``generation.model``."""
    return READER_STAGES if settings.FOUNDRY.generation.model == EXTRACTIVE else STAGES
KEEPALIVE_SECONDS = 15


@require_http_methods(["GET", "POST"])
def ask(request: HttpRequest) -> HttpResponse:
    """GET: the question box. POST (works without JavaScript): answer, then show it at /ask/<id>/."""
    if request.method == "GET":
        return _render_ask(request, AskForm())
    form = AskForm(request.POST)
    if not form.is_valid():
        return _render_ask(request, form, status=400)
    try:
        _, row = query_answer(user=request.user, question=form.cleaned_data["question"])
    except RateLimited as exc:
        response = _render_ask(request, form, error=str(exc), status=429)
        response["Retry-After"] = str(exc.retry_after)
        return response
    except QueryError as exc:
        form.add_error("question", str(exc))
        return _render_ask(request, form, status=400)
    except (QueryFailed, MissingEmbeddings) as exc:
        return _render_ask(request, form, error=str(exc), status=503)
    return redirect("ask-result", query_id=row.pk)


@require_GET
def ask_result(request: HttpRequest, query_id: int) -> HttpResponse:
    row = get_object_or_404(visible_queries(request.user), pk=query_id)
    return _render_ask(request, AskForm(initial={"question": row.question}), row=row)


def _render_ask(request: HttpRequest, form: AskForm, *, row: QueryLog | None = None, error: str = "",
                status: int = 200) -> HttpResponse:
    # select_related(None): visible_queries() joins the user, which .only() would defer (a FieldError).
    recent = (visible_queries(request.user).filter(user=request.user).select_related(None)
              .only("pk", "question", "created_at").order_by("-created_at", "-pk")[:6])
    context: dict[str, Any] = {"form": form, "error": error, "recent": recent, "stages": stages(),
                               **access_context(request.user)}
    if row is not None:
        context.update(answer_context(row, request.user), may_feedback=may_give_feedback(request.user, row))
    return render(request, "ask/ask.html", context, status=status)


@require_POST
def ask_stream(request: HttpRequest) -> HttpResponse:
    """The same question as a POST, answered as a text/event-stream of stage events and then the answer.

    Design rule: the stream carries stage names and the finished answer only, never
    model tokens as they are produced. Foundry promises that every sentence is checked
    against the sources before anyone sees it; streaming raw tokens would show text
    the grounding check may still remove. (POST with the CSRF token rather than
    EventSource's GET, because asking costs a query and leaves an audit row.)
    """
    try:
        question = question_clean(request.POST.get("question", ""))  # QueryError: empty or too long
        scope = query_admit(user=request.user)
    except RateLimited as exc:
        return JsonResponse({"detail": str(exc)}, status=429, headers={"Retry-After": str(exc.retry_after)})
    except QueryError as exc:
        return JsonResponse({"detail": str(exc)}, status=400)
    response = StreamingHttpResponse(_answer_events(request, question, scope), content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    return response


def _answer_events(request: HttpRequest, question: str, scope: list[int] | None) -> Iterator[str]:
    events: queue.Queue[tuple[str, str]] = queue.Queue()
    worker = threading.Thread(target=_answer_worker, args=(events, request.user, question, scope), daemon=True)
    worker.start()
    while True:
        try:
            kind, value = events.get(timeout=KEEPALIVE_SECONDS)
        except queue.Empty:
            yield ": keep-alive\n\n"
            continue
        if kind == "stage":
            yield _sse("stage", {"stage": value, "label": stages().get(value, value)})
        elif kind == "done":
            row = visible_queries(request.user).get(run_id=value)
            context = {**answer_context(row, request.user), "may_feedback": may_give_feedback(request.user, row)}
            html = render_to_string("ask/_answer.html", context, request=request)
            yield _sse("answer", {"html": html, "url": reverse("ask-result", args=[row.pk])})
            return
        else:
            yield _sse("error", {"detail": value})
            return


def _answer_worker(events: queue.Queue, user: Any, question: str, scope: list[int] | None) -> None:
    """Runs answer_question in its own thread so stages can be sent while it works."""
    try:
        answer = answer_question(question=question, user=user, collection_ids=scope,
                                 progress=lambda stage: events.put(("stage", stage)))
        events.put(("done", answer.run_id))
    except (QueryError, QueryFailed, MissingEmbeddings) as exc:
        events.put(("error", str(exc)))
    except Exception:
        logger.exception("streamed query failed")
        events.put(("error", "The query failed unexpectedly; the error is in the server log."))
    finally:
        connections.close_all()  # this thread's own database connection


def _sse(event: str, data: dict) -> str:
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"


RUN_PAGE_SIZE = 25


@require_GET
def run_list(request: HttpRequest) -> HttpResponse:
    runs = selectors.visible_runs(request.user).defer("prompt", "spec_body", "chunks")
    page = Paginator(runs, RUN_PAGE_SIZE).get_page(request.GET.get("page"))
    return render(request, "runs/list.html", {"page": page, "everyone": selectors.sees_every_run(request.user)})


# The stages a run goes through, as the run page lists them (``stage`` on the run; "" is queued).
RUN_STAGES = {"queued": "Queued", "retrieval": "Retrieving sources", "reading": "Choosing the passages to quote",
              "generate": "Writing the document", "grounding": "Checking every sentence", "done": "Done"}


def run_stages(run: GenerationRun) -> dict[str, str]:
    """The stages of ``run``'s writer, in order: the extractive writer reads; a model writes, then is checked."""
    writer = (run.models_used or {}).get("generation") or settings.FOUNDRY.generation.model
    names = ["queued", "retrieval", *(["reading"] if writer == EXTRACTIVE else ["generate", "grounding"]), "done"]
    return {name: RUN_STAGES[name] for name in names}


def review_reason(run: GenerationRun) -> str:
    """Why a run needs review, in words: what its low confidence means for its writer."""
    if run.status != GenerationRun.Status.NEEDS_REVIEW:
        return ""
    if (run.grounding or {}).get("writer") == EXTRACTIVE:
        return "more than half of the spec's sections had nothing in the sources close enough to quote"
    return (f"only {run.sentences_kept} of the {run.sentences_total} sentences the model wrote are supported by "
            "the sources, fewer than generation.min_coverage asks")


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
    steps = [(name, label, "active" if i == now else "past" if i < now else "") for i, (name, label)
             in enumerate(stages.items())]
    return render(request, "runs/detail.html", {
        "run": run, "done": run.is_finished, "document_html": html, "downloadable": document is not None,
        "steps": steps, "stage_label": stages.get(stage, stage),
        "review_reason": review_reason(run),
        "show_grounding": selectors.may_review_grounding(request.user)})


@require_GET
def run_status(request: HttpRequest, run_id: int) -> JsonResponse:
    """What the run page polls: status (and its label) and stage."""
    run = get_object_or_404(selectors.visible_runs(request.user).only("pk", "status", "stage", "created_by"),
                            pk=run_id)
    return JsonResponse({"id": run.pk, "status": run.status, "label": run.get_status_display(),
                         "stage": run.stage, "done": run.is_finished})


@require_GET
def run_download(request: HttpRequest, run_id: int) -> FileResponse:
    """The run's Markdown as an attachment, or 404 (not finished, missing, or outside the outputs folder)."""
    run = get_object_or_404(selectors.visible_runs(request.user), pk=run_id)
    path = selectors.run_output_file(run)
    if path is None:
        raise Http404("This run has no downloadable document.")
    return FileResponse(path.open("rb"), as_attachment=True, filename=selectors.run_download_name(run),
                        content_type="text/markdown; charset=utf-8")
