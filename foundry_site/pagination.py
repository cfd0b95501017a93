"""django-ninja's paginators with bounded inputs.

Unbounded, ``?page=10**25`` or ``?offset=10**25`` becomes an OFFSET that SQLite's
64-bit integers cannot hold: the driver raises OverflowError and the API answers
500. Here such a value is a 422 naming the parameter.
"""
from __future__ import annotations

from ninja import Field, Schema
from ninja.conf import settings as ninja_settings
from ninja.pagination import LimitOffsetPagination as _LimitOffset
from ninja.pagination import PageNumberPagination as _PageNumber

# Far beyond any real list, and far below 2**63 even multiplied by a page size.
MAX_PAGE = 10**9
MAX_OFFSET = 10**12
MAX_LIMIT = 1000


class PageNumberPagination(_PageNumber):
    class Input(Schema):
        page: int = Field(1, ge=1, le=MAX_PAGE)
        page_size: int | None = Field(None, ge=1)  # larger sizes are clamped, as upstream


class LimitOffsetPagination(_LimitOffset):
    class Input(Schema):
        limit: int = Field(ninja_settings.PAGINATION_PER_PAGE, ge=1, le=MAX_LIMIT)
        offset: int = Field(0, ge=0, le=MAX_OFFSET)
