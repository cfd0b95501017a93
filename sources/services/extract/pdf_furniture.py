"""A PDF page's lines with where they stand, and its furniture (running headers and footers) found from that.

Each line of a page's text (``pdf_text``) has the height of its first character on the page (``Line.y``, in PDF
points from the bottom; ``None`` for a blank line, or on a page turned sideways).

Furniture is what stands in the page's top or bottom band (its first or last ``RUNNING_EDGE`` rows of text, by
height) at the same height, give or take ``SLOT_POINTS``, as lines like it on other pages: on three pages of a
longer document, two of one of up to ``RUNNING_PAGES``. Like it is first the same line, its numbers read as "#"
("Page # of #", "Chapter #: Objects, their modes and attributes #" on each page of chapter 3); then a line sharing
its first and last words, ``TEMPLATE_WORDS`` or more and one with letters, with such repeated lines ("Chapter #:
Arrays and matrices #", on the one page of a short chapter that has a header). A lone number is furniture only
where it counts the pages: at the same height on as many pages, as far from the page's index each time (a page
number); any other could as well be a value. A page of no more rows than its bands (the end of a chapter, an
image and its caption) repeats nothing: only its first and last rows, and only where they are like furniture of
fuller pages, are left out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from pypdf import PageObject

from core.units import LETTER

RUNNING_EDGE = 2  # a running header or footer stands among a page's first or last rows of text
RUNNING_PAGES = 4  # ... alike on two pages of a document of up to this many pages, on three of a longer one
SLOT_POINTS = 2.0  # furniture stands at one height on every page it is on, give or take this (PDF points)
ROW_POINTS = 1.0  # lines at heights this close stand on one row
TEMPLATE_WORDS = 2  # first and last words two lines must share to be one template
_DIGITS = re.compile(r"\d+")


@dataclass(frozen=True)
class Line:
    text: str
    y: float | None  # height of the line's first text above the page's bottom (points); None when not known


def page_rotation(page: PageObject) -> int:
    """The page's /Rotate in degrees, 0 to 359 (0 when unreadable)."""
    try:
        return int(page.rotation) % 360
    except (TypeError, ValueError):
        return 0


@dataclass(frozen=True, eq=False)
class _Candidate:
    page: int
    index: int
    top: bool
    y: float | None
    words: tuple[str, ...]  # the line's words, numbers as "#"
    number: int | None  # the line's value when it is a lone number
    short: bool  # on a page of no more rows than its bands


def running_lines(pages: dict[int, list[Line]]) -> dict[int, set[int]]:
    """Page number -> indexes of its lines that are furniture (running headers, footers, page numbers)."""
    least = 2 if len(pages) <= RUNNING_PAGES else 3
    candidates = [c for number, lines in pages.items() for c in _band(number, lines)]
    slots = {c: [p for p in candidates if p.page != c.page and _same_slot(c, p)] for c in candidates}
    full = [c for c in candidates if not c.short]
    repeated = {c for c in full if len({p.page for p in slots[c] if not p.short and _same(c, p)}) >= least - 1}
    found: dict[int, set[int]] = {number: set() for number in pages}
    for c in candidates:
        like = {p.page for p in slots[c] if p in repeated and (_same(c, p) or _template(c, p))}
        if c in repeated or len(like) >= least - 1:
            found[c.page].add(c.index)
    return found


def _band(number: int, lines: list[Line]) -> Iterable[_Candidate]:
    """The lines of a page's top and bottom bands: its first and last ``RUNNING_EDGE`` rows by height (by order
    where heights are not known). On a page of no more rows than that (the end of a chapter, a page of images with
    a caption) only its first and last rows, and those only count where they are like furniture of fuller pages."""
    filled = [i for i, line in enumerate(lines) if line.text.strip()]
    heights = [lines[i].y for i in filled]
    if all(y is not None for y in heights):
        places = [y or 0.0 for y in heights]  # each line's height; rows of lines within ROW_POINTS are one
        rows = _rows(places)
    else:
        places = [-float(k) for k in range(len(filled))]  # each line its own row, in reading order
        rows = places
    if not rows:
        return
    short = len(rows) <= 2 * RUNNING_EDGE
    edge = 1 if short else RUNNING_EDGE
    top, bottom = rows[edge - 1] - ROW_POINTS / 2, rows[-edge] + ROW_POINTS / 2
    for i, place in zip(filled, places, strict=True):
        if bottom < place < top or (short and len(rows) == 1):
            continue
        text = lines[i].text.strip()
        words = tuple(_DIGITS.sub("#", text).split())
        number_only = int(text) if text.isdigit() and len(text) <= 5 else None
        yield _Candidate(number, i, place >= top, lines[i].y, words, number_only, short)


def _rows(heights: list[float]) -> list[float]:
    """The distinct heights of a page's lines, top first, lines within ``ROW_POINTS`` of each other as one."""
    rows: list[float] = []
    for y in sorted(heights, reverse=True):
        if not rows or rows[-1] - y > ROW_POINTS:  # compared with the row's first (highest) line
            rows.append(y)
    return rows


def _same_slot(a: _Candidate, b: _Candidate) -> bool:
    if a.top != b.top:
        return False
    return a.y is None or b.y is None or abs(a.y - b.y) <= SLOT_POINTS


def _same(a: _Candidate, b: _Candidate) -> bool:
    """The same line but for its numbers, or the same page number (as far from the page's index)."""
    if a.number is not None or b.number is not None:  # a lone number is furniture only where it counts the pages
        return a.number is not None and b.number is not None and a.number - a.page == b.number - b.page
    return a.words == b.words and any(LETTER.search(word) for word in a.words)


def _template(a: _Candidate, b: _Candidate) -> bool:
    """The two lines share their first and last words, ``TEMPLATE_WORDS`` or more, one with letters."""
    if a.number is not None or b.number is not None:
        return False
    shared = _shared_ends(a.words, b.words)
    return len(shared) >= TEMPLATE_WORDS and any(LETTER.search(word) for word in shared)


def _shared_ends(a: tuple[str, ...], b: tuple[str, ...]) -> tuple[str, ...]:
    """The first words and the last words two lines have in common (never more words than the shorter has)."""
    most = min(len(a), len(b))
    head = 0
    while head < most and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < most - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    return a[:head] + (a[len(a) - tail :] if tail else ())
