"""Schemas of the query-log API. Fields are listed explicitly."""

from __future__ import annotations

from datetime import date, datetime
from typing import Literal

from ninja import Field, Schema

from core.schemas import InputSchema

from generation.models import QueryFeedback, QueryLog


class QueryLogFilter(Schema):
    user: str | None = Field(None, description="username (auditors only; ignored for others)")
    date_from: date | None = None
    date_to: date | None = None
    answer_class: Literal["normal", "low_confidence", "no_evidence"] | None = None
    collection: str | None = Field(None, description="collection name: rows whose search scope included it")
    feedback: Literal["correct", "incorrect", "none"] | None = None
    q: str | None = Field(None, max_length=200, description="text in the question or the answer")


class FeedbackIn(InputSchema):
    verdict: Literal["correct", "incorrect"]
    note: str = ""


class FeedbackOut(Schema):
    id: int
    verdict: str
    note: str
    user: str | None
    created_at: datetime

    @staticmethod
    def resolve_user(obj: QueryFeedback) -> str | None:
        return obj.user.get_username() if obj.user else None


class QueryLogRowOut(Schema):
    id: int
    run_id: str
    created_at: datetime
    user: str | None
    question: str
    answer_class: str
    status: str
    refusal: str
    coverage: float | None
    cached: bool
    total_ms: float | None
    feedback: str | None

    @staticmethod
    def resolve_user(obj: QueryLog) -> str | None:
        return obj.user.get_username() if obj.user else None

    @staticmethod
    def resolve_total_ms(obj: QueryLog) -> float | None:
        total = obj.timings.get("total") if isinstance(obj.timings, dict) else None
        return float(total) if isinstance(total, (int, float)) else None

    @staticmethod
    def resolve_feedback(obj: QueryLog) -> str | None:
        return getattr(obj, "verdict", None)


class QueryLogDetailOut(QueryLogRowOut):
    answer: str
    mode: str
    collection_ids: list[int] | None  # null: every collection (a superuser's query)
    citations: list[dict]
    conflicts: list[dict]
    channels: dict[str, list[list[int | float]]]
    gate: dict
    timings: dict[str, float]
    model: str
    prompt_tokens: int
    completion_tokens: int
    cost: float
    llm_calls: int
    error: str
    hyde_text: str
    feedback_list: list[FeedbackOut]

    @staticmethod
    def resolve_feedback_list(obj: QueryLog) -> list[QueryFeedback]:
        return list(obj.feedback.select_related("user").order_by("-created_at", "-pk"))
