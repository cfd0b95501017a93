"""A generated document's footnotes: ``[S#]`` markers become ``[^N]`` in order of first use, over a source
list that names each passage's place in its document (section, page, lines; slide, sheet rows, OCR)."""

from __future__ import annotations

import re

from generation.grounded_markdown import MARKER, markup_escape
from retrieval.services.retrieve import Candidate
from sources.models import Source, location_text


def footnotes_render(body: str, included: list[Candidate] | dict[str, str], *, title: str) -> str:
    """Replace [S#] markers by [^N] in order of first use and append the source list; labels of one place (the
    sentences of one Markdown paragraph, quoted in several sections) share its footnote.

    ``included``: the passages given to the model, or their footnote texts by label.
    """
    by_label = included if isinstance(included, dict) else {c.label: footnote_text(c) for c in included}
    numbers: dict[str, int] = {}  # footnote text → its number

    def number(match: re.Match) -> str:
        label = match.group(1)
        if label not in by_label:
            return ""
        note = numbers.setdefault(by_label[label], len(numbers) + 1)
        return f"[^{note}]"

    text = MARKER.sub(number, body)
    notes = [f"[^{n}]: {markup_escape(note)}" for note, n in numbers.items()]
    heading = "" if text.lstrip().startswith("# ") else f"# {title}\n\n"
    return f"{heading}{text}\n\n## Sources\n\n" + "\n".join(notes) + "\n"


def footnote_text(candidate: Candidate) -> str:
    """The footnote of a chunk (``footnote_format``)."""
    chunk = candidate.chunk
    return footnote_format(
        name=chunk.source.name,
        kind=chunk.kind,
        heading=chunk.heading,
        page_start=chunk.page_start,
        page_end=chunk.page_end,
        lines=(chunk.line_start, chunk.line_end),
        ocr_confidence=chunk.ocr_confidence,
    )


def footnote_format(
    *,
    name: str,
    kind: str,
    heading: str,
    page_start: int | None,
    page_end: int | None,
    lines: tuple[int, int],
    ocr_confidence: float | None,
) -> str:
    """``datasheet.pdf §3.2 Power, p. 7, lines 4-15`` (the section by its own heading), then the
    rest of the location in its kind's terms (``location_text``): ``deck.pptx §Agenda, slide 3, lines 2-4``,
    ``pumps.xlsx, sheet Pumps, rows 20-45``, ``scan.png, lines 1-4, OCR, confidence 91 %``."""
    sheet = kind == Source.Kind.XLSX  # the sheet is part of the location, not a section
    section = f" §{_own_heading(heading)}" if heading and not sheet else ""
    where = location_text(
        kind=kind,
        heading=heading if sheet else "",
        page_start=page_start,
        page_end=page_end,
        line_start=lines[0],
        line_end=lines[1],
        ocr_confidence=ocr_confidence,
    )
    return f"{name}{section}, {where}"


def _own_heading(heading: str) -> str:
    """The last part of a heading path; a JSON list index stays with its key (``interfaces[0]``, not ``[0]``)."""
    parts = heading.split(" > ")
    name = parts.pop()
    while name.startswith("[") and parts:
        name = parts.pop() + name
    return name
