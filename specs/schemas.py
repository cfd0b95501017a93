"""API schemas for specs; fields are listed explicitly."""

from __future__ import annotations

from datetime import datetime

from ninja import Field, Schema

from core.schemas import InputSchema
from generation.schemas import RUN_STATUS_HELP, RunStatus


class ApprovedSpecOut(Schema):
    """One approved spec version, read from a ``SpecVersion`` row."""

    name: str = Field(..., alias="spec.name")
    title: str = Field(..., alias="spec.title")
    version: int = Field(..., alias="number")
    approved_at: datetime | None = Field(None, alias="decided_at")
    approved_by: str | None = Field(None, alias="decided_by.username")


class GenerateIn(InputSchema):
    topic: str = Field(..., max_length=1000)
    feature: str | None = Field(None, description="approved spec name; optional when only one is approved")


class RunAccepted(Schema):
    run_id: int
    status: RunStatus = Field(..., description=RUN_STATUS_HELP)
    url: str
