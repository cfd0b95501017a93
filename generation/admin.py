from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from generation.models import Conversation, GenerationRun, QueryFeedback, QueryLog
from sources.admin import ReadOnlyAdmin


@admin.register(GenerationRun)
class GenerationRunAdmin(ReadOnlyAdmin):
    show_full_result_count = False
    list_display = [
        "pk",
        "created_at",
        "short_topic",
        "spec_name",
        "spec_version",
        "status",
        "stage",
        "coverage",
        "llm_calls",
        "created_by",
    ]
    list_filter = ["status", "spec_name"]
    search_fields = ["topic", "spec_name", "output_path"]
    date_hierarchy = "created_at"
    # The whole audit row, read-only: without this the page would show none of its fields (all editable=False).
    fields = readonly_fields = tuple(f.name for f in GenerationRun._meta.fields if not f.primary_key)

    def get_queryset(self, request: HttpRequest) -> Any:
        return (
            super()
            .get_queryset(request)
            .select_related("created_by")
            .defer("prompt", "spec_body", "chunks", "conflicts", "gate", "grounding", "timings")
        )

    @admin.display(description="topic")
    def short_topic(self, obj: GenerationRun) -> str:
        return obj.topic[:80]


@admin.register(QueryLog)
class QueryLogAdmin(ReadOnlyAdmin):
    show_full_result_count = False
    list_display = [
        "created_at",
        "user",
        "short_question",
        "answer_class",
        "status",
        "coverage",
        "llm_calls",
        "model",
        "cached",
    ]
    list_filter = ["kind", "answer_class", "status", "mode", "cached", "model"]
    search_fields = ["question", "answer", "run_id"]
    date_hierarchy = "created_at"
    # The whole audit row, read-only: without this the page would show none of its fields (all editable=False).
    fields = readonly_fields = tuple(f.name for f in QueryLog._meta.fields if not f.primary_key)

    def get_queryset(self, request: HttpRequest) -> Any:
        return (
            super()
            .get_queryset(request)
            .select_related("user")
            .defer("answer", "channels", "citations", "conflicts", "gate", "grounding", "hyde_text", "timings")
        )

    @admin.display(description="question")
    def short_question(self, obj: QueryLog) -> str:
        return obj.question[:80]


@admin.register(QueryFeedback)
class QueryFeedbackAdmin(ReadOnlyAdmin):
    show_full_result_count = False
    list_display = ["created_at", "query", "user", "verdict"]
    list_filter = ["verdict"]
    date_hierarchy = "created_at"


@admin.register(Conversation)
class ConversationAdmin(ReadOnlyAdmin):
    show_full_result_count = False
    list_display = ["updated_at", "owner", "title", "collection"]
    search_fields = ["title"]
    date_hierarchy = "updated_at"
    fields = readonly_fields = ("owner", "title", "collection", "created_at", "updated_at")

    def get_queryset(self, request: HttpRequest) -> Any:
        return super().get_queryset(request).select_related("owner", "collection")
