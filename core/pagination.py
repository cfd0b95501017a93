"""django-ninja's page-number paginator with bounded inputs, for every list of the API.

Unbounded, ``?page=10**25`` becomes an OFFSET that SQLite's 64-bit integers cannot
hold: the driver raises OverflowError and the API answers 500. Here such a value is
a 422 naming the parameter.
"""

from __future__ import annotations

from ninja import Field, Schema
from ninja.pagination import PageNumberPagination as _PageNumber

# Far beyond any real list, and far below 2**63 even multiplied by a page size.
MAX_PAGE = 10**9


class PageNumberPagination(_PageNumber):
    class Input(Schema):
        page: int = Field(1, ge=1, le=MAX_PAGE)
        page_size: int | None = Field(None, ge=1)  # larger sizes are clamped, as upstream
