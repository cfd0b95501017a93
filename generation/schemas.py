"""Request and response schemas of the query and generation-run API. Fields are listed explicitly."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from django.urls import reverse
from ninja import Field, Schema

from core.schemas import InputSchema
from generation.models import Conversation, GenerationRun, QueryLog
from generation.selectors import run_output_file


class QueryIn(InputSchema):
    question: str
    mode: Literal["hybrid", "dense", "bm25"] | None = None
    top_k: int | None = Field(None, ge=1, le=50)
    collection: str | None = Field(None, max_length=100, description="search only this one of your collections")
    conversation_id: int | None = Field(
        None,
        ge=1,
        le=2**62,
        description=(
            "a follow-up in this conversation of yours (from an earlier answer's conversation_id): the question "
            "is made standalone from the earlier turns before retrieval; left out, a new conversation starts"
        ),
    )


class CitationOut(Schema):
    id: str
    chunk_id: int
    source: str
    title: str
    heading: str
    page: int | None
    lines: list[int]
    kind: str = Field("", description="kind of file: pdf, docx, pptx, xlsx, csv, html, image, md, txt, json")
    page_end: int | None = Field(None, description="last page (slide) of a passage that crosses pages")
    ocr_confidence: float | None = Field(None, description="set when the text was read by OCR (0-100)")
    location: str = Field(
        "",
        description="where the passage sits, in its kind's terms: '§ Agenda, slide 3, "
        "lines 2-4', 'sheet Pumps, rows 20-45', 'lines 1-4, OCR, confidence 91 %'",
    )
    score: float
    text: str | None = None


class ConflictSide(Schema):
    label: str
    source: str
    where: str
    quote: str
    dated: str = Field(
        "",
        description="the source's date, YYYY-MM-DD: the one its metadata gives, else its file's modification time "
        "('' for a conflict logged before dates were kept); the later side is the newer revision",
    )


class ConflictOut(Schema):
    quantity: str
    a: ConflictSide
    b: ConflictSide
    detector: str


class QueryOut(Schema):
    query_id: int
    conversation_id: int
    run_id: str
    question: str = Field(..., description="the question answered: a follow-up made standalone, else as asked")
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


class ConversationOut(Schema):
    id: int
    title: str
    collection: str | None = Field(None, description="the one collection it searches; null: all you can read")
    created_at: datetime
    updated_at: datetime

    @staticmethod
    def resolve_collection(obj: Conversation) -> str | None:
        return obj.collection.name if obj.collection is not None else None


class TurnOut(Schema):
    query_id: int = Field(..., alias="pk")
    message: str = Field(..., description="as typed")
    question: str = Field(..., description="as answered: the standalone question made of a follow-up")
    answer_class: str
    answer: str
    refusal: str
    citations: list[CitationOut]
    created_at: datetime

    @staticmethod
    def resolve_message(obj: QueryLog) -> str:
        return obj.message or obj.question  # a turn answered as typed keeps only its question


class ConversationDetailOut(ConversationOut):
    turns: list[TurnOut]

    @staticmethod
    def resolve_turns(obj: Conversation) -> list:
        # Every turn of a conversation is its owner's query, so whoever may read it may read them all.
        return list(obj.turns.order_by("created_at", "pk"))


RunStatus = Literal["pending", "running", "succeeded", "needs_review", "failed"]
RUN_STATUS_HELP = (
    "pending → running → succeeded, or needs_review (written with low confidence: check it "
    "before use), or failed (see error)"
)


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
