"""Pages: the sources list with upload, the source viewer, the original file (download, and inline for the
viewer's pdf.js page)."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
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
from django.utils.http import content_disposition_header
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext
from django.views.decorators.http import require_GET, require_POST

from core.markup import markdown_html, markdown_lines_html
from sources import selectors
from sources.forms import UploadForm
from sources.models import LINE_UNITS, Chunk, Source
from sources.services.extract.blocks import ExtractionError
from sources.viewer import IMAGE_TYPES, ORIGINAL_TYPES, OcrMarks, image_png, ocr_marks, original_quote
from sources.services.uploads import ALLOWED_SUFFIXES, UploadRejected, source_remove, source_upload

PAGE_SIZE = 50
# The viewer's "the cited lines are highlighted", per what a kind of source counts (LINE_UNITS).
UNIT_WORDS = {"lines": gettext_lazy("lines"), "paragraphs": gettext_lazy("paragraphs"), "rows": gettext_lazy("rows")}
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
    public_names = list(collections.filter(public=True).values_list("name", flat=True))
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
        "public_names": public_names,
        "grant_collection": (public_names or ["COLLECTION"])[0],
    }
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
    chunks = ngettext("%(count)d chunk", "%(count)d chunks", result.chunks) % {"count": result.chunks}
    detail = f" ({chunks})" if result.status == "ingested" else ""
    reason = f": {result.reason}" if result.reason else ""
    level = messages.ERROR if result.status in ("failed", "skipped") else messages.SUCCESS
    if result.status == "unchanged":
        text = _("%(name)s is unchanged: the same content is already indexed (%(chunks)s kept)") % {
            "name": upload.name,
            "chunks": chunks,
        }
    else:
        done = {"name": upload.name, "status": result.status}  # the status stays its code, as the badges name it
        text = (
            _("Uploaded new version of %(name)s: %(status)s") if upload.replaced else _("Uploaded %(name)s: %(status)s")
        ) % done
        text += detail + reason
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
    cited = request.GET.get("lines", "")
    lines = _cited_lines(target, cited, markdown=source.kind == Source.Kind.MD) if target else []
    context: dict[str, object] = {
        "source": source,
        "chunks": rendered,
        "target": target,
        "missing": missing,
        "lines": lines,
        "line_unit": UNIT_WORDS[LINE_UNITS.get(source.kind, "lines")],
    }
    if target is not None and source.kind in ORIGINAL_TYPES:
        context["original"] = original_quote(target, lines)
    if target is not None and source.kind == Source.Kind.IMAGE:
        context["ocr"] = _ocr_marks(source, target, lines)
    return render(request, "sources/detail.html", context, status=404 if missing is not None else 200)


def _ocr_marks(source: Source, target: Chunk, lines: list[tuple[int | None, str, bool]]) -> OcrMarks:
    try:
        path = _original_path(source)
    except Http404 as exc:  # the page still shows the text it holds, and says the image is gone
        return OcrMarks(target.page_start or 1, 0, 0, [], 0, 0, problem=str(exc), shown=False)
    return ocr_marks(path, target, lines)


def _cited_lines(chunk: Chunk, cited: str, *, markdown: bool = False) -> list[tuple[int | None, str, bool]]:
    """The chunk's lines, numbered as citations count them (None for a line that stands for no source line: a
    table's header row over its rows stays shown, never marked), each marked when it is within ``cited`` (``52-60``,
    or ``5``: a citation's lines); [] when ``cited`` names none of them or the text's lines cannot be numbered
    (``Chunk.line_spans``). ``markdown``: each line's text is its Markdown as safe HTML, line for line."""
    match = _LINES.fullmatch(cited)
    if not match:
        return []
    first, last = int(match[1]), int(match[2] or match[1])
    spans = chunk.line_spans()
    texts: Sequence[str] = [text for _, text in spans]
    if markdown:
        texts = markdown_lines_html(texts)
    lines = [
        (span[0] if span else None, text, span is not None and span[0] <= last and first <= span[1])
        for (span, _line), text in zip(spans, texts, strict=True)
    ]
    return lines if any(marked for *_, marked in lines) else []


@require_GET
def source_download(request: HttpRequest, source_id: int) -> FileResponse:
    source = get_object_or_404(selectors.readable_sources(request.user), pk=source_id)
    path = _original_path(source)
    return FileResponse(path.open("rb"), as_attachment=True, filename=path.name)


@require_GET
def source_original(request: HttpRequest, source_id: int) -> HttpResponse | FileResponse:
    """The original file inline, for the viewer's page: only kinds whose type a browser cannot run as a page (a
    PDF, an image; an HTML source would be a page of the site), to readers of its collection (404 otherwise).
    An image browsers cannot show (TIFF) comes as a PNG of its ``page``."""
    source = get_object_or_404(selectors.readable_sources(request.user), pk=source_id)
    if source.kind not in ORIGINAL_TYPES and source.kind != Source.Kind.IMAGE:
        raise Http404("This kind of source has no original page to show; download it instead.")
    path = _original_path(source)
    response: HttpResponse | FileResponse
    if source.kind == Source.Kind.IMAGE and path.suffix.lower() not in IMAGE_TYPES:
        page = request.GET.get("page", "1")
        try:
            png = image_png(path, int(page) if page.isdigit() and int(page) > 0 else 1)
        except ExtractionError as exc:
            raise Http404(f"The original image cannot be shown: {exc}") from None
        response = HttpResponse(png, content_type="image/png")
        response["Content-Disposition"] = content_disposition_header(False, f"{path.stem}.png") or "inline"
    else:
        kind = ORIGINAL_TYPES.get(source.kind) or IMAGE_TYPES[path.suffix.lower()]
        response = FileResponse(path.open("rb"), filename=path.name, content_type=kind)
    response["X-Content-Type-Options"] = "nosniff"
    response["Cache-Control"] = "private, no-cache"  # a reader who loses access must not read it from a cache
    return response


def _original_path(source: Source) -> Path:
    root = Path(os.path.realpath(source.root))
    path = Path(os.path.realpath(source.absolute_path))
    # realpath resolves symbolic links and "..": a path stored in the database
    # (or a link swapped in on disk) must not reach a file outside the root.
    if not path.is_relative_to(root) or not path.is_file():
        raise Http404("The original file is not available.")
    return path


@require_POST
def source_delete_view(request: HttpRequest, source_id: int) -> HttpResponse:
    source = get_object_or_404(selectors.readable_sources(request.user), pk=source_id)
    if not request.user.is_staff:
        raise PermissionDenied("Only staff can delete sources.")
    source_remove(source_id=source.pk)
    done = {"path": source.path, "collection": source.collection.name}
    messages.success(request, _("Deleted %(path)s from collection %(collection)s.") % done)
    return redirect("sources:list")
