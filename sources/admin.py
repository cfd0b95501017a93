"""Admin for the knowledge base: sources and chunks are written by ingest only, so they are read-only here.

Collections are the one editable thing: who may read which sources.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypedDict

from django.contrib import admin
from django.db.models import Count, QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html
from django.utils.text import Truncator

from sources.models import Chunk, Collection, Source, SourceSummary

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations


class ReadOnlyAdmin(admin.ModelAdmin):
    """View-only admin: for rows that services own (ingest keeps chunks, FTS rows and vectors in
    step; audit logs and decision histories are append-only)."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class CollectionCounts(TypedDict):
    n_sources: int
    n_readers: int


@admin.register(Collection)
class CollectionAdmin(admin.ModelAdmin):
    list_display = [
        "name",
        "public",
        "source_count",
        "reader_count",
        "folder",
        "synced_at",
        "description",
        "created_at",
    ]
    list_filter = ["public"]
    search_fields = ["name", "description", "folder"]
    filter_horizontal = ["readers"]
    # The bound folder is set by `foundry collections bind`, which refuses overlapping folders.
    fields = ["name", "description", "public", "readers", "folder", "synced_at", "sync_error", "created_at"]
    readonly_fields = ["folder", "synced_at", "sync_error", "created_at"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[WithAnnotations[Collection, CollectionCounts]]:
        return (
            super()
            .get_queryset(request)
            .annotate(n_sources=Count("sources", distinct=True), n_readers=Count("readers", distinct=True))
        )

    def get_readonly_fields(self, request: HttpRequest, obj: Collection | None = None) -> list[str]:
        # Ingest finds a collection by name (`--collection NAME`); renaming one would make the
        # next ingest create a new collection and move every source into it.
        bound = ["folder", "synced_at", "sync_error", "created_at"]
        return ["name", *bound] if obj else bound

    @admin.display(description="sources", ordering="n_sources")
    def source_count(self, obj: WithAnnotations[Collection, CollectionCounts]) -> int:
        return obj.n_sources

    @admin.display(description="readers", ordering="n_readers")
    def reader_count(self, obj: WithAnnotations[Collection, CollectionCounts]) -> int:
        return obj.n_readers


@admin.register(Source)
class SourceAdmin(ReadOnlyAdmin):
    list_display = ["path", "collection", "status", "kind", "chunk_count", "ingested_at"]
    list_filter = ["status", "collection", "kind"]
    search_fields = ["path", "title"]
    list_select_related = ["collection"]
    date_hierarchy = "ingested_at"
    fields = readonly_fields = (
        "path",
        "title",
        "collection",
        "kind",
        "status",
        "reason",
        "chunks_link",
        "root",
        "sha256",
        "size",
        "mtime",
        "embedding_model",
        "chunking",
        "created_at",
        "updated_at",
        "ingested_at",
    )

    @admin.display(description="chunks")
    def chunks_link(self, obj: Source) -> str:
        url = reverse("admin:sources_chunk_changelist") + f"?source__id__exact={obj.pk}"
        return format_html('<a href="{}">{} chunks</a>', url, obj.chunk_count)


@admin.register(Chunk)
class ChunkAdmin(ReadOnlyAdmin):
    list_display = ["__str__", "heading", "pages", "lines", "token_count", "preview"]
    list_filter = ["source__collection", "source__kind"]
    search_fields = ["text", "heading"]
    list_select_related = ["source"]
    show_full_result_count = False  # COUNT(*) over every chunk is slow on large knowledge bases.
    list_per_page = 50
    fields = readonly_fields = (
        "source",
        "ordinal",
        "heading",
        "page_start",
        "page_end",
        "line_start",
        "line_end",
        "token_count",
        "text",
        "context",
        "created_at",
    )

    def get_queryset(self, request: HttpRequest) -> QuerySet[Chunk]:
        return super().get_queryset(request).defer("context")

    @admin.display(description="pages")
    def pages(self, obj: Chunk) -> str:
        if not obj.page_start:
            return ""
        return str(obj.page_start) if obj.page_end in (None, obj.page_start) else f"{obj.page_start}-{obj.page_end}"

    @admin.display(description="lines")
    def lines(self, obj: Chunk) -> str:
        return f"{obj.line_start}-{obj.line_end}"

    @admin.display(description="text")
    def preview(self, obj: Chunk) -> str:
        return Truncator(obj.text).chars(120)


@admin.register(SourceSummary)
class SourceSummaryAdmin(ReadOnlyAdmin):
    list_display = ["source", "model", "created_at", "preview"]
    list_filter = ["model", "source__collection"]
    search_fields = ["source__path", "text"]
    list_select_related = ["source"]
    fields = readonly_fields = ("source", "model", "text", "created_at")

    @admin.display(description="summary")
    def preview(self, obj: SourceSummary) -> str:
        return Truncator(obj.text).chars(120)
