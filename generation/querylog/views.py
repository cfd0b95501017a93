"""Pages: the query-log browser (list, detail, CSV), feedback on an answer, and the dashboard.

Auditors (``generation.view_querylog``) see every user's queries; anyone else, staff
included, only their own (see ``generation.querylog.selectors``).
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from typing import Any

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_POST

from generation.audit_chain import QUERIES, chain_verify
from generation.querylog import charts, selectors
from generation.querylog.feedback import FeedbackError, feedback_record
from generation.querylog.forms import FeedbackForm, QueryLogFilterForm
from sources.models import Collection, citation_label, citation_location
from sources.selectors import readable_chunks
from sources.viewer import viewer_url

PAGE_SIZE = 50
CSV_COLUMNS = [
    "id",
    "created_at",
    "run_id",
    "user",
    "question",
    "answer_class",
    "status",
    "refusal",
    "coverage",
    "total_ms",
    "llm_calls",
    "prompt_tokens",
    "completion_tokens",
    "cost",
    "model",
    "cached",
    "feedback",
    "sources",
    "answer",
]


def _filtered(request: HttpRequest) -> tuple[QueryLogFilterForm, Any]:
    """The filter form and the rows it selects: none while a filter is invalid (the form names it), never every
    row as if it had not been asked."""
    form = QueryLogFilterForm(request.GET or None, viewer=request.user)
    visible = selectors.visible_queries(request.user)
    if form.is_bound and not form.is_valid():
        return form, visible.none()
    return form, selectors.queries_filter(visible, form.filters(), viewer=request.user)


def _filter_errors(form: QueryLogFilterForm) -> str:
    return "; ".join(f"{form[name].label}: {' '.join(map(str, errors))}" for name, errors in form.errors.items())


@require_GET
def querylog_list(request: HttpRequest) -> HttpResponse:
    form, rows = _filtered(request)
    rows = rows.defer("channels", "hyde_text", "gate", "conflicts", "citations")
    page = Paginator(rows, PAGE_SIZE).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    return render(
        request,
        "querylog/list.html",
        {
            "form": form,
            "errors": _filter_errors(form),
            "page": page,
            "query": query.urlencode(),
            "everyone": selectors.sees_every_query(request.user),
            "chain": _chain_state(),
        },
    )


def _chain_state() -> dict[str, Any]:
    """Whether the whole query log verifies against its hash chain (every row, not only the viewer's), and where
    it first breaks: verified afresh on every view, so a row changed a moment ago shows at once."""
    report = chain_verify(QUERIES)
    first = report.first
    problems = {
        "changed": _("it was changed after it was written"),
        "removed": _("the row before it was removed"),
        "out_of_order": _("it was moved or inserted out of order"),
        "unchained": _("it was written outside the chain"),
    }
    state: dict[str, Any] = {"ok": report.ok, "rows": report.rows, "head": report.head_hash}
    if first is not None:
        state.update(row_id=first.row_id, problem=first.problem, reason=problems[first.problem])
    return state


@require_GET
def querylog_csv(request: HttpRequest) -> HttpResponse | StreamingHttpResponse:
    """Every row that matches the filters (not just one page), as CSV."""
    form, rows = _filtered(request)
    if form.errors:
        text = f"No export: {_filter_errors(form)}\n"
        return HttpResponse(text, status=400, content_type="text/plain; charset=utf-8")
    stamp = timezone.now().strftime("%Y%m%d-%H%M")
    response = StreamingHttpResponse(_csv_lines(rows), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="query-log-{stamp}.csv"'
    return response


class _Echo:
    def write(self, value: str) -> str:
        return value


def _csv_lines(rows: Any) -> Iterator[str]:
    writer = csv.writer(_Echo())
    yield writer.writerow(CSV_COLUMNS)
    for row in rows.iterator(chunk_size=500):
        sources = "; ".join(f"[{c.get('id')}] {c.get('source')}, {citation_location(c)}" for c in row.citations)
        values = [
            row.pk,
            row.created_at.isoformat(),
            row.run_id,
            row.user.get_username() if row.user else "",
            row.question,
            row.answer_class,
            row.status,
            row.refusal,
            row.coverage,
            row.timings.get("total"),
            row.llm_calls,
            row.prompt_tokens,
            row.completion_tokens,
            row.cost,
            row.model,
            row.cached,
            row.verdict or "",
            sources,
            row.answer,
        ]
        yield writer.writerow([_cell(v) for v in values])


def _cell(value: Any) -> Any:
    # A spreadsheet runs a cell that starts with = + - @ as a formula; questions are user text.
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return "" if value is None else value


def _citation(citation: dict, readable: dict[int, int]) -> dict:
    """A stored citation with its location and the viewer link every other page gives it (its lines marked)."""
    source_id = readable.get(citation.get("chunk_id"))  # type: ignore[arg-type]
    url = viewer_url(source_id, citation["chunk_id"], citation.get("lines")) if source_id else ""
    return {**citation, "location": citation_label(citation), "url": url}


@require_GET
def querylog_detail(request: HttpRequest, query_id: int) -> HttpResponse:
    row = get_object_or_404(selectors.visible_queries(request.user), pk=query_id)
    chunk_ids = {int(hit[0]) for hits in row.channels.values() for hit in hits} | {
        c.get("chunk_id") for c in row.citations
    }
    readable = dict(readable_chunks(request.user).filter(pk__in=chunk_ids).values_list("pk", "source_id"))
    channels = {
        name: [{"chunk_id": int(h[0]), "score": h[1], "source_id": readable.get(int(h[0]))} for h in hits]
        for name, hits in row.channels.items()
    }
    collections = (
        None
        if row.collection_ids is None
        else list(Collection.objects.filter(pk__in=row.collection_ids).order_by("name").values_list("name", flat=True))
    )
    return render(
        request,
        "querylog/detail.html",
        {
            "row": row,
            "channels": channels,
            "collections": collections,
            "readable": readable,
            "citations": [_citation(c, readable) for c in row.citations],
            "feedback": row.feedback.select_related("user").order_by("-created_at", "-pk"),
            "may_feedback": selectors.may_give_feedback(request.user, row),
            "show_grounding": selectors.may_review_grounding(request.user),
        },
    )


@require_POST
def querylog_feedback(request: HttpRequest, query_id: int) -> HttpResponse:
    """Record a verdict; only the asker or a staff auditor may (anyone else gets 404, as for the row itself)."""
    row = get_object_or_404(selectors.visible_queries(request.user), pk=query_id)
    if not selectors.may_give_feedback(request.user, row):
        return HttpResponse(status=404)
    form = FeedbackForm(request.POST)
    target = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        target = reverse("querylog-detail", args=[row.pk])
    if not form.is_valid():
        messages.error(
            request, _("Feedback needs a verdict (correct or incorrect); the note has at most 4000 characters.")
        )
        return redirect(target)
    try:
        feedback_record(
            query=row, user=request.user, verdict=form.cleaned_data["verdict"], note=form.cleaned_data["note"]
        )
    except FeedbackError as exc:
        messages.error(request, str(exc))
        return redirect(target)
    messages.success(request, _("Thank you: your feedback is recorded."))
    return redirect(target)


DASHBOARD_DAYS = (7, 30, 90)


@require_GET
def dashboard(request: HttpRequest) -> HttpResponse:
    wanted = request.GET.get("days", "30")
    days = int(wanted) if wanted in {str(d) for d in DASHBOARD_DAYS} else 30
    stats = selectors.dashboard_stats(selectors.visible_queries(request.user), days=days)
    return render(
        request,
        "querylog/dashboard.html",
        {
            "stats": stats,
            "days": days,
            "choices": DASHBOARD_DAYS,
            "chart": charts.daily_bars(stats.days),
            "everyone": selectors.sees_every_query(request.user),
        },
    )
