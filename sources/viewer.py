"""What the source viewer shows of a cited passage on its original page (pdf.js, in the browser)."""

from __future__ import annotations

from dataclasses import dataclass

from sources.models import Chunk

# Kinds whose original file the viewer shows as the page itself, with the content type it is served as.
ORIGINAL_TYPES = {"pdf": "application/pdf"}


@dataclass(frozen=True)
class OriginalQuote:
    """The page the viewer opens at, the pages the quote may stand on, and the quote, line by line, for the
    browser to find in those pages' text layers."""

    page: int
    first_page: int
    last_page: int
    lines: list[str]

    def as_json(self) -> dict:
        return {"page": self.page, "pages": [self.first_page, self.last_page], "lines": self.lines}


def original_quote(chunk: Chunk, cited: list[tuple[int, str, bool]]) -> OriginalQuote:
    """``chunk``'s quote on its pages: the ``cited`` lines marked (``views._cited_lines``), else the whole chunk.

    The lines are kept apart because extraction joins, drops or reorders some (page furniture, columns): the
    browser marks each line it finds, and says which it could not."""
    marked = [text for _, text, is_cited in cited if is_cited]
    lines = [line.strip() for line in (marked or chunk.text.split("\n")) if line.strip()]
    first = chunk.page_start or 1
    return OriginalQuote(page=first, first_page=first, last_page=chunk.page_end or first, lines=lines)
