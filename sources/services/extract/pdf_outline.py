"""A PDF's outline as section starts on its pages: each entry starts where its destination points on the page.

An outline entry names a page and, most often, the height on it where its section starts (``/XYZ``, ``/FitH`` and
``/FitR`` destinations carry a top). Its section starts at the first line at or below that height that is the entry's
title ("3.2 Changing the length of an object" for the entry "Changing the length of an object", a long title wrapped
onto two lines too): a destination may point above its heading, at the page's top. Where no such line is found, the
section starts at the first line of text at or below the height; an entry with neither starts where the one before
it on the page does (the page's first line for the first). So a line's heading is the section it stands in, not the
last section that starts on its page.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from pypdf import PdfReader

from sources.services.extract.pdf_furniture import SLOT_POINTS, Line

logger = logging.getLogger(__name__)

_NUMBER = re.compile(r"^[\dA-Z]{1,3}(?:\.\d{1,3})*\.?\s+")  # a section's number before its title: "3.2 ", "A.1 "
_LABEL = re.compile(r"^\w+\s+[\dA-Z]{1,3}\.?:?\s+")  # ... or a word and a number: "Appendix C ", "Kapitel 3. "


@dataclass(frozen=True)
class Entry:
    title: str
    path: tuple[str, ...]  # the headings from the outline's top down to this entry
    top: float | None  # where on the page the section starts (points from the bottom); None when not said


def outline_starts(reader: PdfReader) -> dict[int, list[Entry]]:
    """Page number -> outline entries that start on it, in outline order."""
    starts: dict[int, list[Entry]] = {}

    def walk(items: list, path: tuple[str, ...]) -> None:
        last: tuple[str, ...] = path
        for item in items:
            if isinstance(item, list):
                walk(item, last)
                continue
            try:
                number = reader.get_destination_page_number(item)
                title = str(item.title).strip()
                top = _top(item)
            except Exception:  # outlines pointing nowhere are common; skip that entry
                continue
            if number is None:  # a destination on no page of this document: skipped the same way
                continue
            last = path + (title,)
            starts.setdefault(number + 1, []).append(Entry(title, last, top))

    try:
        walk(reader.outline, ())
    except Exception:  # a broken outline must not cost the text
        logger.info("pdf outline unreadable")
        return {}
    return starts


def _top(item: object) -> float | None:
    top = getattr(item, "top", None)
    try:
        return float(top) if top is not None else None
    except (TypeError, ValueError):
        return None


def title_line(line: str, entries: list[Entry]) -> tuple[str, ...] | None:
    """The heading path of the outline entry whose title this line is, if any (its section number aside)."""
    spaced = " ".join(line.split())
    text = spaced.casefold()
    bare = {_NUMBER.sub("", spaced, count=1).casefold(), _LABEL.sub("", spaced, count=1).casefold()}
    for entry in entries:
        wanted = " ".join(entry.title.split()).casefold()
        if not wanted:
            continue
        if wanted == text or wanted in bare or (text.startswith(wanted) and len(text) <= len(wanted) + 3):
            return entry.path
    return None


def section_starts(lines: list[Line], entries: list[Entry]) -> list[tuple[int, tuple[str, ...]]]:
    """(index of the line a section starts at, its heading path) for each entry starting on this page, in order."""
    filled = [i for i, line in enumerate(lines) if line.text.strip()]
    out: list[tuple[int, tuple[str, ...]]] = []
    at = 0  # a section starts no earlier than the one before it
    for entry in entries:
        after = [i for i in filled if i >= at]
        below = after
        if entry.top is not None and all(lines[i].y is not None for i in after):
            below = [i for i in after if (lines[i].y or 0.0) <= entry.top + SLOT_POINTS]
        titled = next((i for i in below if _titled(lines, filled, i, entry)), None)
        if titled is not None:
            at = titled
        elif below is not after:  # the first line below the height; past the page's last, a later page's text
            at = below[0] if below else len(lines)
        out.append((at, entry.path))
    return out


def _titled(lines: list[Line], filled: list[int], i: int, entry: Entry) -> bool:
    """The line at ``i`` is the entry's title, or its title's first line (a long title wraps onto the next)."""
    if title_line(lines[i].text, [entry]):
        return True
    k = filled.index(i)
    return k + 1 < len(filled) and bool(title_line(f"{lines[i].text} {lines[filled[k + 1]].text}", [entry]))


def sections(
    lines: list[Line], starts: list[tuple[int, tuple[str, ...]]], heading: tuple[str, ...]
) -> list[tuple[int, list[str], tuple[str, ...]]]:
    """The page's lines cut where sections start: (first line number, lines, heading path); the lines before the
    first start are under ``heading`` (the section the page before ended in)."""
    cuts = [(0, heading)]
    for index, path in starts:
        if index == cuts[-1][0]:
            cuts[-1] = (index, path)
        else:
            cuts.append((index, path))
    texts = [line.text for line in lines]
    ends = [index for index, _ in cuts[1:]] + [len(lines)]
    return [(start + 1, texts[start:end], path) for (start, path), end in zip(cuts, ends) if end > start or start == 0]
