"""Request and response schemas of the sources API. Fields are listed explicitly."""

from __future__ import annotations

from datetime import datetime

from ninja import Schema

from sources.models import Chunk, Source


class ErrorOut(Schema):
    detail: str


class SourceFilter(Schema):
    collection: str | None = None
    status: Source.Status | None = None


class SourceOut(Schema):
    id: int
    collection: str
    path: str
    title: str
    kind: str
    status: str
    reason: str
    chunk_count: int
    size: int
    created_at: datetime
    ingested_at: datetime | None

    @staticmethod
    def resolve_collection(obj: Source) -> str:
        return obj.collection.name


class UploadOut(Schema):
    name: str
    replaced: bool
    status: str
    reason: str
    chunks: int
    source: SourceOut | None


class ChunkOut(Schema):
    id: int
    source_id: int
    source_path: str
    source_title: str
    collection: str
    ordinal: int
    text: str
    heading: str
    page_start: int | None
    page_end: int | None
    line_start: int
    line_end: int
    location: str
    ocr_confidence: float | None  # set when the text was read by OCR (0-100)

    @staticmethod
    def resolve_source_path(obj: Chunk) -> str:
        return obj.source.path

    @staticmethod
    def resolve_source_title(obj: Chunk) -> str:
        return obj.source.title

    @staticmethod
    def resolve_collection(obj: Chunk) -> str:
        return obj.source.collection.name
