"""Request and response schemas of the query and generation-run API. Fields are listed explicitly."""
from __future__ import annotations

from datetime import datetime
from typing import Literal

from django.urls import reverse
from ninja import Field, Schema

from foundry_site.schemas import InputSchema
from generation.models import GenerationRun
from generation.selectors import run_output_file


class QueryIn(InputSchema):
    question: str
    mode: Literal["hybrid", "dense", "bm25"] | None = None
    top_k: int | None = Field(None, ge=1, le=50)
    collection: str | None = Field(None, max_length=100, description="search only this one of your collections")


class CitationOut(Schema):
    id: str
    chunk_id: int
    source: str
    title: str
    heading: str
    page: int | None
    lines: list[int]
    score: float
    text: str | None = None


class ConflictSide(Schema):
    label: str
    source: str
    where: str
    quote: str


class ConflictOut(Schema):
    quantity: str
    a: ConflictSide
    b: ConflictSide
    detector: str


class QueryOut(Schema):
    query_id: int
    run_id: str
    answer_class: str
    answer: str
    citations: list[CitationOut]
    conflicts: list[ConflictOut]
    coverage: float | None
    refusal: str
    hint: str
    timings: dict[str, float]
    llm_calls: int
    cached: bool


RunStatus = Literal["pending", "running", "succeeded", "needs_review", "failed"]
RUN_STATUS_HELP = ("pending → running → succeeded, or needs_review (written with low confidence: check it "
                   "before use), or failed (see error)")


class RunOut(Schema):
    id: int
    status: RunStatus = Field(..., description=RUN_STATUS_HELP)
    stage: str
    topic: str
    spec: str = Field(..., alias="spec_name")
    spec_version: int
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    coverage: float | None
    low_confidence: bool
    sentences_total: int
    sentences_kept: int
    conflicts: list[ConflictOut]
    error: dict | None
    download: str | None = None

    @staticmethod
    def resolve_download(obj: GenerationRun) -> str | None:
        """Set once the document can be fetched, in a list as on its own."""
        return reverse("api:run_download", args=[obj.pk]) if run_output_file(obj) else None
