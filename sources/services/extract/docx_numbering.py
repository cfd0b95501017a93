"""Word list numbers as Word draws them, from the document's numbering part (``word/numbering.xml``).

A numbered paragraph names a list (``w:numId``) and a level (``w:ilvl``), on itself or through its style ("List
Number"). The list's abstract definition gives each level a format (``decimal``, ``lowerLetter``, ``upperRoman``,
``bullet``, …), a start and a text with the levels' numbers in it (``%1.``, ``%1.%2``, ``%2)``). Counters run per
list: a paragraph at a level counts it on and restarts every deeper level; a list whose definition it shares with
another but which overrides its start (``w:lvlOverride/w:startOverride``, as Word writes "Restart numbering")
counts from there. A bullet level, and a format this module does not draw, reads "-".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from docx.document import Document
    from docx.text.paragraph import Paragraph
    from lxml.etree import _Element

BULLET = "- "
_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
MAX_LEVELS = 9  # Word's levels are 0-8
MAX_STYLE_CHAIN = 5
_ROMAN: tuple[tuple[int, str], ...] = (
    (1000, "m"), (900, "cm"), (500, "d"), (400, "cd"), (100, "c"), (90, "xc"), (50, "l"), (40, "xl"),
    (10, "x"), (9, "ix"), (5, "v"), (4, "iv"), (1, "i"),
)  # fmt: skip


class Numbering:
    """The list markers of one document's paragraphs, in reading order (each call counts its list on)."""

    def __init__(self, document: Document) -> None:
        self.levels: dict[str, dict[int, tuple[str, str, int]]] = {}  # numId -> ilvl -> (format, text, start)
        self.counters: dict[str, list[int | None]] = {}
        try:
            root = document.part.numbering_part.element
        except (KeyError, NotImplementedError):  # no numbering part: every list item is a bullet
            return
        abstract = {a.get(_W + "abstractNumId"): _levels(a) for a in root.iter(_W + "abstractNum")}
        for num in root.iter(_W + "num"):
            levels = dict(abstract.get(_val(num.find(_W + "abstractNumId")), {}))
            for override in num.iter(_W + "lvlOverride"):
                ilvl, start = _int(override.get(_W + "ilvl")), override.find(_W + "startOverride")
                if ilvl in levels and start is not None:
                    levels[ilvl] = (*levels[ilvl][:2], _int(_val(start), 1))
            self.levels[num.get(_W + "numId") or ""] = levels

    def marker(self, paragraph: Paragraph) -> str:
        """ "1. ", "a) ", "2.1. " or "- " for a list item, '' for any other paragraph."""
        num_id, ilvl, listed = _num_pr(paragraph)
        if num_id == "0":  # numbering taken off the paragraph
            return ""
        if not num_id:
            return BULLET if listed else ""
        levels = self.levels.get(num_id)
        if not levels or ilvl not in levels:
            return BULLET
        counters = self.counters.setdefault(num_id, [None] * MAX_LEVELS)
        fmt, _, start = levels[ilvl]
        if fmt != "bullet":
            counters[ilvl] = start if counters[ilvl] is None else (counters[ilvl] or 0) + 1
        for deeper in range(ilvl + 1, MAX_LEVELS):
            counters[deeper] = None
        return _render(levels, counters, ilvl)


def _levels(abstract: _Element) -> dict[int, tuple[str, str, int]]:
    out: dict[int, tuple[str, str, int]] = {}
    for lvl in abstract.iter(_W + "lvl"):
        ilvl = _int(lvl.get(_W + "ilvl"))
        if 0 <= ilvl < MAX_LEVELS:
            fmt = _val(lvl.find(_W + "numFmt")) or "decimal"
            out[ilvl] = (fmt, _val(lvl.find(_W + "lvlText")), _int(_val(lvl.find(_W + "start")), 1))
    return out


def _render(levels: dict[int, tuple[str, str, int]], counters: list[int | None], ilvl: int) -> str:
    fmt, text, _ = levels[ilvl]
    if fmt == "bullet" or fmt not in _FORMATS or "%" not in text:
        return BULLET
    for level in range(MAX_LEVELS - 1, -1, -1):  # %10 does not exist; from the top so "%1" never eats "%12"
        token = f"%{level + 1}"
        if token in text:
            level_fmt, _, start = levels.get(level, ("decimal", "", 1))
            value = counters[level] if counters[level] is not None else start
            text = text.replace(token, _FORMATS.get(level_fmt, _FORMATS["decimal"])(value or 0))
    return text.strip() + " "


def _roman(value: int) -> str:
    out = ""
    for amount, letters in _ROMAN:
        while value >= amount:
            out, value = out + letters, value - amount
    return out


def _letter(value: int) -> str:
    """a..z, then aa..zz, as Word counts on past z."""
    if value < 1:
        return str(value)
    return chr(ord("a") + (value - 1) % 26) * ((value - 1) // 26 + 1)


_FORMATS: dict[str, Callable[[int], str]] = {
    "decimal": str,
    "decimalZero": lambda v: f"{v:02d}",
    "lowerLetter": _letter,
    "upperLetter": lambda v: _letter(v).upper(),
    "lowerRoman": _roman,
    "upperRoman": lambda v: _roman(v).upper(),
}


def _num_pr(paragraph: Paragraph) -> tuple[str, int, bool]:
    """(numId, ilvl, in a List style) set on the paragraph, else on its style or a style it is based on."""
    style = paragraph.style
    listed = bool(style is not None and (style.name or "").lower().startswith("list"))
    props = paragraph._p.pPr
    num_id, ilvl = _ids(props.numPr if props is not None else None)
    for _ in range(MAX_STYLE_CHAIN):
        if num_id or style is None:
            break
        style_props = style.element.pPr
        style_id, style_ilvl = _ids(style_props.numPr if style_props is not None else None)
        num_id, ilvl = style_id, ilvl if props is not None and props.numPr is not None else style_ilvl
        style = style.base_style
    return num_id, ilvl, listed or bool(num_id)


def _ids(num_pr: object) -> tuple[str, int]:
    if num_pr is None:
        return "", 0
    num_id = getattr(num_pr, "numId", None)
    ilvl = getattr(num_pr, "ilvl", None)
    return (str(num_id.val) if num_id is not None else ""), (ilvl.val if ilvl is not None else 0)


def _val(element: _Element | None) -> str:
    return (element.get(_W + "val") or "") if element is not None else ""


def _int(text: str | None, default: int = 0) -> int:
    try:
        return int(text or "")
    except ValueError:
        return default
