"""Pages: the sources list with upload, the source viewer and the original-file download."""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db.models import Count, Max
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from foundry_site.core.markup import markdown_html
from sources import selectors
from sources.forms import UploadForm
from sources.models import LINE_UNITS, Chunk, Source
from sources.services.uploads import ALLOWED_SUFFIXES, UploadRejected, source_remove, source_upload

PAGE_SIZE = 50
_LINES = re.compile(r"(\d{1,9})(?:-(\d{1,9}))?")  # a citation's lines: "52-60" or "5"


@require_GET
def source_list(request: HttpRequest) -> HttpResponse:
    return _render_list(request, UploadForm(user=request.user))


def _render_list(request: HttpRequest, form: UploadForm, *, status: int = 200) -> HttpResponse:
    collections = (
        selectors.readable_collections(request.user)
        .order_by("name")
        .annotate(source_count=Count("sources"), last_ingest=Max("sources__ingested_at"))
    )
    sources = selectors.readable_sources(request.user).select_related("collection").order_by("collection__name", "path")
    selected = request.GET.get("collection", "")
    if selected:
        sources = sources.filter(collection__name=selected)
    page = Paginator(sources, PAGE_SIZE).get_page(request.GET.get("page"))
    context = {
        "collections": collections,
        "page": page,
        "selected": selected,
        "form": form,
        "query": urlencode({"collection": selected}) if selected else "",
        "pending": any(s.status == Source.Status.PENDING for s in page),
        "max_file_mb": f"{settings.FOUNDRY.ingest.max_file_mb:g}",
        "accepted_formats": " ".join(ALLOWED_SUFFIXES),
        # Who may upload, when the viewer may not: the administrators who grant it, the public collections read.
        "upload_contacts": [n for n in selectors.access_contacts() if n != request.user.get_username()],
        "public_names": list(collections.filter(public=True).values_list("name", flat=True)),
    }
    context["grant_collection"] = (context["public_names"] or ["COLLECTION"])[0]
    return render(request, "sources/list.html", context, status=status)


@require_POST
def source_upload_view(request: HttpRequest) -> HttpResponse:
    form = UploadForm(request.POST, request.FILES, user=request.user)
    if not form.is_valid():
        return _render_list(request, form, status=400)
    try:
        upload = source_upload(
            collection=form.cleaned_data["collection"],
            upload=form.cleaned_data["file"],
            replace=form.cleaned_data["replace"],
        )
    except UploadRejected as exc:
        form.add_error("file", f"{form.cleaned_data['file'].name}: {exc}")
        return _render_list(request, form, status=exc.status_code)
    result = upload.result
    chunks = f"{result.chunks} chunk{'' if result.chunks == 1 else 's'}"
    detail = f" ({chunks})" if result.status == "ingested" else ""
    reason = f": {result.reason}" if result.reason else ""
    level = messages.ERROR if result.status in ("failed", "skipped") else messages.SUCCESS
    if result.status == "unchanged":
        text = f"{upload.name} is unchanged: the same content is already indexed ({chunks} kept)"
    else:
        version = "new version of " if upload.replaced else ""
        text = f"Uploaded {version}{upload.name}: {result.status}{detail}{reason}"
    messages.add_message(request, level, text)
    anchor = f"#source-{upload.source.pk}" if upload.source else ""
    return redirect(reverse("sources:list") + anchor)


@require_GET
def source_detail(request: HttpRequest, source_id: int) -> HttpResponse:
    source = get_object_or_404(selectors.readable_sources(request.user).select_related("collection"), pk=source_id)
    chunks = list(source.chunks.order_by("ordinal"))
    wanted = request.GET.get("chunk")
    target = next((c for c in chunks if str(c.pk) == wanted), None)
    # Markdown sources read as formatted text (raw HTML in them shown as text); other kinds verbatim.
    rendered = [(c, markdown_html(c.text, links=True) if source.kind == Source.Kind.MD else None) for c in chunks]
    # A link to a passage the source no longer holds (it was ingested again since) shows the source as it is now.
    missing = wanted if wanted is not None and target is None else None
    context = {
        "source": source,
        "chunks": rendered,
        "target": target,
        "missing": missing,
        "lines": _cited_lines(target, request.GET.get("lines", "")) if target else [],
        "line_unit": LINE_UNITS.get(source.kind, "lines"),
    }
    return render(request, "sources/detail.html", context, status=404 if missing is not None else 200)


def _cited_lines(chunk: Chunk, cited: str) -> list[tuple[int, str, bool]]:
    """The chunk's lines, numbered as citations count them, each marked when it is within ``cited`` (``52-60``, or
    ``5``: a citation's lines); [] when ``cited`` names none of them or the text does not map line by line."""
    match = _LINES.fullmatch(cited)
    if not match:
        return []
    first, last = int(match[1]), int(match[2] or match[1])
    lines = [(n, text, first <= n <= last) for n, text in chunk.numbered_lines()]
    return lines if any(marked for *_, marked in lines) else []


@require_GET
def source_download(request: HttpRequest, source_id: int) -> FileResponse:
    source = get_object_or_404(selectors.readable_sources(request.user), pk=source_id)
    root = Path(os.path.realpath(source.root))
    path = Path(os.path.realpath(source.absolute_path))
    # realpath resolves symbolic links and "..": a path stored in the database
    # (or a link swapped in on disk) must not reach a file outside the root.
    if not path.is_relative_to(root) or not path.is_file():
        raise Http404("The original file is not available.")
    return FileResponse(path.open("rb"), as_attachment=True, filename=path.name)


@require_POST
def source_delete_view(request: HttpRequest, source_id: int) -> HttpResponse:
    source = get_object_or_404(selectors.readable_sources(request.user), pk=source_id)
    if not request.user.is_staff:
        raise PermissionDenied("Only staff can delete sources.")
    source_remove(source_id=source.pk)
    messages.success(request, f"Deleted {source.path} from collection {source.collection.name}.")
    return redirect("sources:list")
