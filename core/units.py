"""A passage split into the units an extractive reader quotes: sentences, list items, table rows.

Every unit is a verbatim slice of the passage text (``text == passage[start:end]``) and
knows which of the passage's lines it covers, so a quote cites its own lines, not the
whole chunk's. Sentence ends are found by punctuation, except where the period belongs
to an abbreviation ("e.g.", "approx.", "Fig."), an initial, or a numbered reference
("Section 3. …" is one sentence); decimals and versions ("3.3 V", "2.4.1") never split,
since no space follows their points.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

# Lower-cased words that end with a period without ending the sentence.
ABBREVIATIONS = frozenset(
    """
    e.g i.e etc approx appr ca cf vs incl excl resp max min typ nom no nos nr fig figs tab eq eqs ref refs sec
    sect ch chap vol pp p para art mr mrs ms dr prof st jr sr inc ltd co corp dept est al
    jan feb mar apr jun jul aug sep sept oct nov dec mon tue wed thu fri sat sun
""".split()
)
# A number after one of these words is a reference ("Section 3. Wiring", "step 2."), not a sentence end.
NUMBERED = frozenset(
    "section sec chapter ch step table tab figure fig item version v rev revision page p no "
    "part appendix annex clause article art".split()
)
_END = re.compile(r"[.!?][\"')\]]*(?=\s+[\"'(\[]?[A-Z0-9À-Ý])")
_MARKER = re.compile(r"\s*(?:[-*+•]|\d{1,3}[.)]|[a-z][.)])\s+")  # a list item's bullet or number
_LIST_ITEM = re.compile(rf"^{_MARKER.pattern}\S")
# A labelled value on its own line (``interfaces[0].max_sensors: 8``, ``voltage_v: 3.3``): a key path or a
# lower-case key, then a colon. Each is a unit, like a list item (JSON sources are written this way).
KEY_PARTS = re.compile(r"[\s._\[\]]+")
_FIELD = re.compile(r"^\s*(?:[a-z_][\w-]*|[A-Za-z_][\w-]*[.\[][\w.\[\]-]*):\s+\S")
# A labelled value of a record (an object in a list: ``interfaces[1].protocols[4].port: 123``) is read with the
# value of the record's naming key (``interfaces[1].protocols[4].name: NTP client``), as a table row with its header.
_RECORD = re.compile(r"^(.*\])\.(.+)$")  # a key path: its record (the last list item in it), the key within
_NAMING_KEYS = ("name", "title", "label", "id")
# The keys of a range's ends or points (``storage_temperature_c.min`` and ``.max``): an object holding only these is one
# value, read and quoted whole, as a table row is ("-40 … 85"); one end alone answers half the question.
BOUNDS = frozenset("min max minimum maximum typ typical nom nominal low high lower upper from to".split())
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s")
_TABLE_ROW = re.compile(r"^\s*\|.*\|\s*$")
CELL_SEPARATOR = " | "  # between the cells of a table row extracted from a PDF, an Office file, HTML or a sheet
_TABLE_RULE = re.compile(r"^\s*\|?[\s:|-]*-[\s:|-]*\|?\s*$")
_WORD_BEFORE = re.compile(r"([A-Za-zÀ-ÿ.]+)$")
_MEASURE_BEFORE = re.compile(r"\d\s?[A-Za-zµΩ°%]{1,4}$")
_NUMBER_BEFORE = re.compile(r"([A-Za-zÀ-ÿ]+)\.?\s+\(?\d+(?:\.\d+)*$")
_RUN_IN = re.compile(r"^(?:\*\*|__)(.+?)(?:\*\*|__)\s")
_OPEN_ENDS = set(",;:-–—(/&+=")  # a line ending in one of these goes on in the next
HEADER_WORDS = 4  # words of a header row's cell at most
LETTER = re.compile(r"[^\W\d_]")  # a letter of any alphabet
_DIGIT = re.compile(r"\d")
SHORT_LINE = 60  # characters: a shorter line without closing punctuation is not wrapped prose
MAX_ITEM_WORDS = 60  # a longer list item is quoted sentence by sentence


@dataclass(frozen=True)
class Unit:
    text: str  # verbatim: passage[start:end]
    kind: str  # sentence | item (of a list) | field (a labelled value: ``key.path: value``) | row
    start: int
    end: int
    line_first: int  # 0-based lines of the passage text the unit covers
    line_last: int
    context: str = ""  # read with the unit when scoring (a table's header row, a record's name), never quoted

    @property
    def scored_text(self) -> str:
        """What the unit is scored by: a table row under its header; a labelled value with its key path
        in words (``storage_temperature_c.min`` as ``storage temperature c min``), as an embedder reads words, and
        its record's name after it (``interfaces 1 protocols 4 port: 123 (NTP client)``)."""
        if self.kind == "field":
            key, value = field_parts(self.text)
            named = f" ({self.context})" if self.context else ""
            return f"{' '.join(KEY_PARTS.split(key)).strip()}:{value}{named}"
        return f"{self.context}\n{self.text}" if self.context else self.text


# The source lines ``[first, last]`` each line of a passage's text stands for, None for a line that stands for none
# (a table's header row repeated over its rows, the blank line between two blocks): kept for a passage whose text
# does not map line by line (``maps_line_by_line``), such as a sheet's rows, a Word file's paragraphs or a slide.
LineMap = list[list[int] | None]


def mapped_lines(line_map: LineMap, first: int, last: int) -> tuple[int, int] | None:
    """The source lines of a passage's text lines ``first``..``last`` (0-based) by its ``line_map``; None when none
    of them stands for a source line."""
    spans = [span for span in line_map[first : last + 1] if span]
    return (min(s[0] for s in spans), max(s[1] for s in spans)) if spans else None


def maps_line_by_line(text: str, line_start: int, line_end: int, page_start: int | None, page_end: int | None) -> bool:
    """Whether a passage's n-th line is source line ``line_start + n``. A chunk's text keeps its paragraphs' line
    breaks and one blank line between them, so it does exactly when its line count matches its span on one page (a
    PDF chunk across pages, or paragraphs further apart, do not: those are cited whole)."""
    return text.count("\n") == line_end - line_start and page_start == page_end


def passage_units(text: str) -> list[Unit]:
    """The units of ``text`` in order: sentences, list items and labelled values, table rows; headings,
    table rules and blank lines are none."""
    lines = _lines(text)
    units: list[Unit] = []
    paragraph: list[tuple[int, int]] = []  # (line index, start offset) of the open paragraph's lines
    header = ""  # of a Markdown table
    over, columns = "", 0  # the header row of a table written as cells, and its number of cells
    i = 0
    while i < len(lines):
        start, end = lines[i]
        line = text[start:end]
        item = _LIST_ITEM.match(line) or _FIELD.match(line)
        cells = 0 if _TABLE_ROW.match(line) or item else _cells(line)
        if not line.strip() or _HEADING.match(line) or _TABLE_ROW.match(line) or item or cells:
            units += _paragraph_units(text, lines, paragraph)
            paragraph = []
        if line.strip() and not cells:
            over, columns = "", 0  # rows of cells stand a blank line apart (one block each), under one header
        if not line.strip() or _HEADING.match(line):
            header = ""
        elif cells:
            following = _cells(text[slice(*lines[i + 1])]) if i + 1 < len(lines) else 0
            if cells > columns and 0 < following <= cells and names_columns(line.split(CELL_SEPARATOR)):
                over, columns = line.strip(), cells  # a table's header row, over its first row
            else:
                units.append(_unit(text, lines, i, i, "row", context=over if cells <= columns else ""))
        elif _TABLE_ROW.match(line):
            rule = text[slice(*lines[i + 1])] if i + 1 < len(lines) else ""
            if _TABLE_RULE.match(rule) and "-" in rule:
                header, i = line.strip(), i + 2
                continue
            if not (_TABLE_RULE.match(line) and "-" in line):
                units.append(_unit(text, lines, i, i, "row", context=header))
        elif item:
            last = _item_end(text, lines, i)
            units += _item_units(text, lines, i, last, "item" if _LIST_ITEM.match(line) else "field")
            i = last
        else:
            paragraph.append((i, start))
        i += 1
    return _lists_headed(
        _records_named(_ranges_joined(text, lines, units + _paragraph_units(text, lines, paragraph))), text
    )


def field_parts(text: str) -> tuple[str, str]:
    """A labelled value's key path and value; of a range (``a.b.min: 1`` over ``a.b.max: 247``), the path of the
    range and its ends (``a.b``, ``min: 1, max: 247``)."""
    lines = text.split("\n")
    parent = _range_of(lines[0])
    if len(lines) == 1 or parent is None or any(_range_of(line) != parent for line in lines):
        key, _, value = text.partition(":")  # one value, on a line or going on below it
        return key, value
    ends = [line.strip().partition(":") for line in lines]
    return parent, " " + ", ".join(f"{key.rpartition('.')[2]}:{value}" for key, _, value in ends)


def _ranges_joined(text: str, lines: list[tuple[int, int]], units: list[Unit]) -> list[Unit]:
    """``units`` with each run of labelled values on consecutive lines that are the ends of one range (keys of
    ``BOUNDS`` under one key path) made one unit."""
    out: list[Unit] = []
    for unit in units:
        last = out[-1] if out and out[-1].kind == "field" == unit.kind else None
        end = _range_of(text[slice(*lines[unit.line_first])]) if unit.line_first == unit.line_last else None
        if (
            last
            and end
            and unit.line_first == last.line_last + 1
            and end == _range_of(text[slice(*lines[last.line_last])])
        ):
            out[-1] = _unit(text, lines, last.line_first, unit.line_last, "field")
        else:
            out.append(unit)
    return out


def _range_of(line: str) -> str | None:
    """The range's key path of a labelled value that is one of its ends (``a.b`` of ``a.b.min: 1``), else None."""
    parent, _, key = line.partition(":")[0].strip().rpartition(".")
    return parent if parent and key.lower() in BOUNDS else None


def _cells(line: str) -> int:
    """How many cells a table row written as cells joined by `` | `` holds (a PDF's, a Word file's, a sheet's
    table); 0 for a line that is no such row."""
    return line.count(CELL_SEPARATOR) + 1 if CELL_SEPARATOR in line else 0


def names_columns(cells: list[str]) -> bool:
    """Whether a row's cells can be a table's header row: two or more short cells of words, no numbers ("Parameter |
    Min. | Max.", "Order code | Description"); not a row of values, as a passage opening inside a table does, nor a
    list's "-" and its item."""
    return len(cells) > 1 and all(
        0 < len(cell.split()) <= HEADER_WORDS and LETTER.search(cell) and not _DIGIT.search(cell) for cell in cells
    )


def table_rule(header: str) -> str:
    """The Markdown rule under a table's header row (``--- | ---``, which also holds under a header of cells without
    outer pipes): a quoted row is shown under both."""
    return " | ".join("---" for _ in header.strip().strip("|").split("|"))


def _records_named(units: list[Unit]) -> list[Unit]:
    """``units`` with each labelled value of a record given the record's name (its ``_NAMING_KEYS`` value, when the
    text holds it) as context: ``interfaces[1].protocols[4].port: 123`` is the port of "NTP client"."""
    records = [_RECORD.match(field_parts(u.text)[0].strip()) if u.kind == "field" else None for u in units]
    names: dict[str, str] = {}
    for unit, record in zip(units, records):
        if record and record[2] in _NAMING_KEYS:
            names.setdefault(record[1], field_parts(unit.text)[1].strip())
    named = [record and record[2] not in _NAMING_KEYS and names.get(record[1]) for record in records]
    return [replace(unit, context=name) if name else unit for unit, name in zip(units, named)]


def _lists_headed(units: list[Unit], text: str) -> list[Unit]:
    """``units`` with the items of a list that stands right under its heading (``_list_heads``: "So formatieren Sie
    Text kursiv" above "1. Wählen Sie …", "Wiring rules:" above "- Use …") given that heading as context, as a table's
    rows are given their header: what the list is for is named once, above its first item (``heads`` reads them
    back)."""
    out = list(units)
    for k in _list_heads(units, text):
        j = k + 1
        while j < len(out) and out[j].kind == "item" and not out[j].context:
            out[j] = replace(out[j], context=units[k].text)
            j += 1
    return out


def heads(units: list[Unit]) -> list[int]:
    """The indexes into ``passage_units``' units of the headings of their lists (``_list_heads``), read off the item
    below each, which carries its heading as context."""
    return [
        k
        for k, (unit, below) in enumerate(zip(units, units[1:]))
        if unit.kind == "sentence" and below.kind == "item" and below.context == unit.text
    ]


def stands_apart(lines: list[str], unit: Unit, *, below: bool = True) -> bool:
    """Whether ``unit`` (of the passage whose ``lines`` these are) has a blank line, or nothing, above it, and (with
    ``below``) under it: a paragraph of its own."""
    first, last = unit.line_first, unit.line_last
    above = first == 0 or not lines[first - 1].strip()
    return above and (not below or last + 1 >= len(lines) or not lines[last + 1].strip())


def _list_heads(units: list[Unit], text: str) -> list[int]:
    """The indexes into ``units`` (a passage's, in order) of the one-line sentences that head the list right below
    them (nothing but blank lines between): a label (``is_label``), or one ending in a colon; and, above a numbered
    list, a sentence standing as a paragraph of its own (``text``: the passage's, to see the paragraph), which
    introduces the procedure ("Any frame can be set to a mode which hides its text from printing." above "1. Select
    the frame.")."""
    lines = text.split("\n")

    def alone(unit: Unit) -> bool:  # the whole of its line, and a blank line (or nothing) above it
        return lines[unit.line_first].strip() == unit.text and stands_apart(lines, unit, below=False)

    return [
        k
        for k, (unit, below) in enumerate(zip(units, units[1:]))
        if unit.kind == "sentence"
        and unit.line_first == unit.line_last
        and below.kind == "item"
        and below.line_first - unit.line_last <= 2
        and (
            is_label(unit.text)
            or (unit.text.endswith(":") and is_label(unit.text[:-1]))
            or (alone(unit) and bool(_NUMBERED.match(below.text)) and not unit.context)
        )
    ]


_NUMBER = r"\s*(\d{1,3}|[a-z])[.)]"  # a numbered item's number ("1.", "2)", "b)"), not a bullet
_NUMBERED = re.compile(rf"{_NUMBER}\s+\S")
# An item's number alone; an upper-case letter too, which with a full stop is as often a name's initial ("J. Smith"):
# either way it belongs with the words after it.
_NUMBER_ALONE = re.compile(rf"{_NUMBER}\s*", re.IGNORECASE)


def numbered_run(units: list[Unit], index: int) -> list[int]:
    """The indexes into ``units`` (a passage's, in order) of the numbered list ``units[index]`` is a step of: the
    items next to it whose numbers go on from one to the next ("1." "2." "3.", "a)" "b)"), up to the first unit
    that is not one (a sentence, a bullet, a row) or does not go on ("1." after "3." starts another list);
    ``[]`` when ``units[index]`` is no numbered item. Blank lines between the items do not part them (an HTML
    list's items are blocks of their own). A procedure is its steps together: quoted alone, step 1 of "1. Hook …
    2. Press … 3. Pull …" tells no one how it is done."""

    def number(i: int) -> int | None:
        return _step(units[i].text) if units[i].kind == "item" else None

    def goes_on(before: int, after: int) -> bool:
        first, second = number(before), number(after)
        return first is not None and second is not None and second == first + 1

    if number(index) is None:
        return []
    first = last = index
    while first > 0 and goes_on(first - 1, first):
        first -= 1
    while last + 1 < len(units) and goes_on(last, last + 1):
        last += 1
    return list(range(first, last + 1))


def continued_head(text: str, following: str) -> str | None:
    """The heading of the numbered list that ``following`` (the next chunk's first piece) goes on with or opens, when
    the heading stands in ``text`` (a chunk's): ``text`` ends with "Do as follows:" and ``following`` opens with "1. …",
    or ``text`` holds "Do as follows:" over "1. …" "2. …" and ``following`` opens with "3. …" (``heads``,
    ``numbered_run``). None otherwise. The chunker repeats the heading above the rest of the list, so that steps cut
    off from it are still read as the procedure they belong to."""
    if _step(following) is None:
        return None
    own = len(passage_units(text))
    units = passage_units(f"{text}\n\n{following}")
    run = numbered_run(units, own) if own < len(units) else []
    return units[run[0] - 1].text if run and 0 < run[0] <= own and run[0] - 1 in heads(units) else None


def list_across(before: list[Unit], after: list[Unit]) -> tuple[list[int], list[int]]:
    """A numbered list cut by a chunk boundary: the indexes into ``before`` (a chunk's units) of the list it leaves
    off with, and into ``after`` (the next chunk's) of the steps that go on with it ("1." "2." | "3." "4."), when
    ``after`` opens with them (under nothing but the list's heading repeated, ``continued_head``); ``([], [])``
    otherwise."""
    steps = [i for i, unit in enumerate(before) if unit.kind == "item" and _step(unit.text) is not None]
    opening = next((i for i, unit in enumerate(after) if unit.kind == "item"), None)
    if not steps or opening is None or opening > 1 or (opening == 1 and 0 not in heads(after)):
        return [], []
    if _step(after[opening].text) != (_step(before[steps[-1]].text) or 0) + 1:
        return [], []
    return numbered_run(before, steps[-1]), numbered_run(after, opening)


def numbered_lines(text: str) -> int:
    """How many lines of ``text`` open a numbered item (``_NUMBERED``): the chunker cuts a block of more than one a
    step at a time."""
    return sum(_NUMBERED.match(line) is not None for line in text.split("\n"))


def number_alone(text: str, start: int = 0, end: int | None = None) -> bool:
    """Whether ``text[start:end]`` is nothing but a list item's number ("7.", "b)"): the chunker never cuts after
    one. Read in place, as a long line is read for each of its sentences."""
    return _NUMBER_ALONE.fullmatch(text, start, len(text) if end is None else end) is not None


def _step(text: str) -> int | None:
    """The number of the numbered item ``text`` opens with (``_NUMBERED``): "3." is 3, "c)" the letter's code point;
    None when it opens with none."""
    found = _NUMBERED.match(text)
    if found is None:
        return None
    mark = found.group(1)
    return int(mark) if mark.isdigit() else ord(mark)


def item_sentences(unit: Unit) -> list[str]:
    """The sentences of a list item of more than one, its marker left out ([] otherwise): an item is quoted
    whole, and read sentence by sentence too (its first sentence may answer on its own)."""
    if unit.kind != "item":
        return []
    marker = _MARKER.match(unit.text)
    body = unit.text[marker.end() :] if marker else unit.text
    lines = _lines(body)
    sentences = [u.text for u in _paragraph_units(body, lines, [(i, start) for i, (start, _) in enumerate(lines)])]
    return sentences if len(sentences) > 1 else []


def paragraph_lead(text: str, unit: Unit) -> int | None:
    """The line (0-based) that opens ``unit``'s paragraph when it is a label (``is_label``) above the unit:
    ``Version 2.4.1 - released 2026-06-09`` above ``Maintenance release. Fixed: …``. None when the unit is on that
    line, or the paragraph opens otherwise."""
    lines = _lines(text)
    first = unit.line_first
    while first > 0 and text[slice(*lines[first - 1])].strip():
        first -= 1
    line = text[slice(*lines[first])]
    return first if first != unit.line_first and is_label(line) else None


def title_line(text: str) -> str:
    """The first line of ``text`` when it is a label standing alone (a blank line or a capitalised one follows it:
    no wrapped prose), as a plain-text document opens with its title; else ""."""
    first, _, rest = text.lstrip("\n").partition("\n")
    return first.strip() if is_label(first) and (not rest.strip() or _starts_anew(rest)) else ""


def is_decoration(line: str) -> bool:
    """Whether ``line`` only draws: rules and frames of punctuation (``# =====``, ``-----``, ``*****``), with no
    letter or digit. Such a line is neither a title nor a heading."""
    return bool(line.strip()) and not any(ch.isalnum() for ch in line)


def text_title(text: str) -> str:
    """The title a plain-text document opens with: its first line that is not a decoration (``title_line``), a
    heading's name when it is written as one (``# Name``, under a ``# =====`` frame as configuration files and
    scripts write it); else ""."""
    lines = text.lstrip("\n").split("\n")
    while lines and (is_decoration(lines[0]) or not lines[0].strip()):
        lines.pop(0)
    if lines and _HEADING.match(lines[0]):
        name = lines[0].strip().lstrip("#").strip()
        return name if is_label(name) else ""
    return title_line("\n".join(lines))


def _starts_anew(line: str) -> bool:
    """Whether ``line`` opens with a capital or a digit, as a new line does, rather than going on with the one above."""
    head = line.lstrip()[:1]
    return head.isupper() or head.isdigit()


def is_label(line: str) -> bool:
    """Whether ``line`` names rather than says: short, with a letter, neither running on into the next line nor
    ending a sentence, and no heading, list item, labelled value or table row of its own kind
    (``Version 2.4.1 - released 2026-06-09``, ``Pump Controller PX-100 - Firmware Release Notes``)."""
    line = line.strip()
    if len(line) >= SHORT_LINE or not any(ch.isalpha() for ch in line) or _runs_on(line) or line[-1] in ".!?":
        return False
    return not (_HEADING.match(line) or _TABLE_ROW.match(line) or _LIST_ITEM.match(line) or _FIELD.match(line))


def _lines(text: str) -> list[tuple[int, int]]:
    spans, start = [], 0
    for match in re.finditer(r"\n", text):
        spans.append((start, match.start()))
        start = match.end()
    spans.append((start, len(text)))
    return spans


def _unit(
    text: str,
    lines: list[tuple[int, int]],
    first: int,
    last: int,
    kind: str,
    *,
    start: int | None = None,
    end: int | None = None,
    context: str = "",
) -> Unit:
    """The unit from ``start`` (default: line ``first``'s start) to ``end`` (line ``last``'s end), trimmed."""
    start = lines[first][0] if start is None else start
    end = lines[last][1] if end is None else end
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return Unit(
        text[start:end], kind, start, end, _line_of(lines, start), _line_of(lines, max(start, end - 1)), context
    )


def _line_of(lines: list[tuple[int, int]], offset: int) -> int:
    for index, (_, end) in enumerate(lines):
        if offset <= end:
            return index
    return len(lines) - 1


def _item_end(text: str, lines: list[tuple[int, int]], first: int) -> int:
    """The last line of the list item starting at ``first``: indented continuation lines belong to it."""
    last = first
    for j in range(first + 1, len(lines)):
        line = text[slice(*lines[j])]
        if not line.strip() or _LIST_ITEM.match(line) or _FIELD.match(line) or not line[:1].isspace():
            break
        last = j
    return last


def _item_units(text: str, lines: list[tuple[int, int]], first: int, last: int, kind: str) -> list[Unit]:
    item = _unit(text, lines, first, last, kind)
    if len(item.text.split()) <= MAX_ITEM_WORDS:
        return [item]
    return [
        Unit(u.text, kind, u.start, u.end, u.line_first, u.line_last)
        for u in _sentences(text, lines, item.start, item.end)
    ]


def _paragraph_units(text: str, lines: list[tuple[int, int]], paragraph: list[tuple[int, int]]) -> list[Unit]:
    """A paragraph's sentences. A short line that does not run on (no comma, colon, hyphen … at its end)
    followed by a capitalised one is a line of its own, not wrapped prose: ``Version 2.4.1 - released
    2026-06-09`` above ``Maintenance release.``, or a table row of a PDF (``Weight 210 g``)."""
    out: list[Unit] = []
    first = paragraph[0][0] if paragraph else 0
    for (index, _), nxt in zip(paragraph, paragraph[1:] + [(-1, -1)]):
        line = text[slice(*lines[index])].rstrip()
        follower = text[slice(*lines[nxt[0]])].lstrip() if nxt[0] >= 0 else ""
        if nxt[0] >= 0 and not (len(line) < SHORT_LINE and not _runs_on(line) and _starts_anew(follower)):
            continue
        out += _run_in(_sentences(text, lines, lines[first][0], lines[index][1]))
        first = nxt[0]
    return out


def _runs_on(line: str) -> bool:
    """Whether ``line`` goes on in the next: it ends in a comma, colon, dash … (``_OPEN_ENDS``); not a hyphen
    standing alone, which is an empty cell of a PDF's table row (``Reverse polarity protection - yes - -``)."""
    return line[-1:] in _OPEN_ENDS and not (line.endswith(" -") or line == "-")


def _run_in(sentences: list[Unit]) -> list[Unit]:
    """A paragraph led by a bold run-in heading (``**E05 – Firmware image rejected.** The file …``): its later
    sentences are read under that heading, as table rows under their header."""
    label = _RUN_IN.match(sentences[0].text) if sentences else None
    if not label:
        return sentences
    return sentences[:1] + [
        Unit(u.text, u.kind, u.start, u.end, u.line_first, u.line_last, label.group(1)) for u in sentences[1:]
    ]


def _sentences(text: str, lines: list[tuple[int, int]], start: int, end: int) -> list[Unit]:
    out: list[Unit] = []
    cursor = start
    for match in _END.finditer(text, start, end):
        if not sentence_ends(text[cursor : match.start() + 1]):
            continue
        out.append(_unit(text, lines, 0, 0, "sentence", start=cursor, end=match.end()))
        cursor = match.end()
    if text[cursor:end].strip():
        out.append(_unit(text, lines, 0, 0, "sentence", start=cursor, end=end))
    return [u for u in out if u.text]


def sentence_ends(head: str) -> bool:
    """Whether the punctuation mark closing ``head`` ends a sentence (see the module docstring)."""
    if not head.endswith("."):
        return True
    if _MEASURE_BEFORE.search(head[:-1]):  # "… 3600 s." and "… 5 min." end with a unit, not an abbreviation
        return True
    word = _WORD_BEFORE.search(head[:-1])
    if word:
        token = word.group(1).lower().strip(".")
        if token in ABBREVIATIONS or (len(token) == 1 and token.isalpha()) or "." in token:
            return False
    numbered = _NUMBER_BEFORE.search(head[:-1])
    return not (numbered and numbered.group(1).lower() in NUMBERED)
