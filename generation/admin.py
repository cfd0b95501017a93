from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from generation.models import GenerationRun
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
