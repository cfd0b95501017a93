"""What every JSON request body of the API shares.

A request body is rejected (422, naming the field) when it carries a key the
schema does not know: a typo such as ``topk`` must not be ignored silently,
leaving the caller to believe it took effect. Strings holding unpaired UTF-16
surrogates (``"\\ud800"`` is valid JSON, but not Unicode) are refused the same
way, before they reach SQLite, which cannot store them.
"""

from __future__ import annotations

from typing import Annotated, Any

from ninja import Field, Schema
from pydantic import ConfigDict, field_validator

from core.text import unpaired_surrogates

# The largest value SQLite's INTEGER (and so a primary key) holds.
MAX_ROW_ID = 2**63 - 1

RowId = Annotated[int, Field(ge=1, le=MAX_ROW_ID)]


class InputSchema(Schema):
    model_config = ConfigDict(extra="forbid")

    @field_validator("*", mode="after")
    @classmethod
    def _valid_unicode(cls, value: Any) -> Any:
        if isinstance(value, str) and unpaired_surrogates(value):
            raise ValueError("contains unpaired UTF-16 surrogates, which are not valid Unicode")
        return value
