"""Sources API: list, upload, delete, read one chunk. Everything is scoped to the caller's collections."""
# No ``from __future__ import annotations`` here: django-ninja builds pydantic
# models from these signatures and cannot resolve string annotations such as
# "Query[SourceFilter]" when generating the OpenAPI schema.

from django.db.models import QuerySet
from django.shortcuts import get_object_or_404
from ninja import File, Form, Query, Router
from ninja.errors import HttpError
from ninja.files import UploadedFile
from ninja.pagination import paginate

from core.pagination import PageNumberPagination
from core.requests import ApiRequest
from core.schemas import RowId
from sources import selectors
from sources.models import Chunk, Collection, Source
from sources.schemas import ChunkOut, ErrorOut, SourceFilter, SourceOut, UploadOut
from sources.services.ingest import DEFAULT_COLLECTION
from sources.services.uploads import source_remove, source_upload

router = Router(tags=["sources"])

ERRORS = {401: ErrorOut, 403: ErrorOut, 404: ErrorOut}


@router.get("/sources", response=list[SourceOut])
@paginate(PageNumberPagination, page_size=50)
def list_sources(request: ApiRequest, filters: Query[SourceFilter]) -> QuerySet[Source]:
    """The sources the caller can read, by collection and path; optionally one collection or status."""
    sources = selectors.readable_sources(request.auth).select_related("collection").order_by("collection__name", "path")
    if filters.collection:
        if not selectors.readable_collections(request.auth).filter(name=filters.collection).exists():
            raise HttpError(404, f"No collection {filters.collection!r} that you can read.")
        sources = sources.filter(collection__name=filters.collection)
    if filters.status:
        sources = sources.filter(status=filters.status)
    return sources


@router.post("/sources", response={201: UploadOut, 400: ErrorOut, 409: ErrorOut, 413: ErrorOut, **ERRORS})
def upload_source(
    request: ApiRequest,
    file: File[UploadedFile],
    collection: Form[str] = DEFAULT_COLLECTION,
    replace: Form[bool] = False,
) -> tuple[int, dict]:
    """Upload one file into a collection and ingest it: .txt .md .markdown .pdf .json .docx .html .htm .pptx .xlsx
    .csv, or an image to OCR (.png .jpg .jpeg .tif .tiff).

    ``collection`` defaults to ``default``, as on the upload page. 400: bad type or content, 404: no such collection
    you can read, 409: the name exists (send replace=true for a new version), 413: larger than ingest.max_file_mb.
    """
    coll = _upload_collection(request, collection)
    upload = source_upload(collection=coll, upload=file, replace=replace)
    return 201, {
        "name": upload.name,
        "replaced": upload.replaced,
        "status": upload.result.status,
        "reason": upload.result.reason,
        "chunks": upload.result.chunks,
        "source": upload.source,
    }


def _upload_collection(request: ApiRequest, name: str) -> Collection:
    coll = selectors.uploadable_collections(request.auth).filter(name=name).first()
    if coll is not None:
        return coll
    if selectors.readable_collections(request.auth).filter(name=name).exists():
        raise HttpError(403, "You can read this collection but not upload to it.")
    raise HttpError(404, f"No collection {name!r} that you can read.")  # one answer for missing and unreadable


@router.delete("/sources/{source_id}", response={204: None, **ERRORS})
def delete_source(request: ApiRequest, source_id: RowId) -> tuple[int, None]:
    """Delete a source with its chunks and vectors (staff only)."""
    source = get_object_or_404(selectors.readable_sources(request.auth), pk=source_id)
    if not request.auth.is_staff:
        raise HttpError(403, "Only staff can delete sources.")
    source_remove(source_id=source.pk)
    return 204, None


@router.get("/sources/{source_id}/chunks/{chunk_id}", response={200: ChunkOut, **ERRORS})
def get_chunk(request: ApiRequest, source_id: RowId, chunk_id: RowId) -> Chunk:
    """One chunk: its verbatim text and where it sits (heading path, pages, lines)."""
    chunks = selectors.readable_chunks(request.auth).select_related("source__collection")
    return get_object_or_404(chunks, pk=chunk_id, source_id=source_id)
