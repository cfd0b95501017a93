"""Turn a file into text blocks that remember where they came from.

A block is a paragraph-sized piece of text with its heading path, page (PDF)
and 1-based line span. Text files report lines of the file; PDFs report lines
within the page's extracted text. Extraction never guesses: a file it cannot
read raises ``ExtractionError`` with the reason shown to the user.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

KINDS = {".txt": "txt", ".md": "md", ".markdown": "md", ".pdf": "pdf", ".json": "json"}
MAX_JSON_DEPTH = 64
# A JSON "bomb" is a small file whose parsed form is far larger than the file:
# ``[[],[],…]`` or ``[0,0,…]`` cost ~20 times their size once parsed. Refuse files
# with more items than any document needs, counted before parsing.
MAX_JSON_ITEMS = 2_000_000

MAX_HEADING_CHARS = 300
# A reason names a repeated key and its path; hostile keys can be megabytes long.
MAX_JSON_KEY_CHARS = 80
MAX_JSON_PATH_CHARS = 500
_FENCE = re.compile(r"^\s*(```|~~~)")


class ExtractionError(Exception):
    """The file cannot be turned into text; the message says why."""


@dataclass(frozen=True)
class Block:
    text: str
    heading: tuple[str, ...]
    page: int | None
    line_start: int
    line_end: int


@dataclass(frozen=True)
class Extracted:
    title: str
    blocks: list[Block]


def kind_of(path: Path) -> str | None:
    return KINDS.get(path.suffix.lower())


def extract(path: Path, data: bytes) -> Extracted:
    """Extract ``data`` (the bytes of ``path``) by file type."""
    kind = kind_of(path)
    if not data:
        raise ExtractionError("empty file (0 bytes)")
    if kind == "pdf":
        from sources.services.pdf import extract_pdf

        result = extract_pdf(data, fallback_title=path.stem)
    elif kind == "json":
        result = extract_json(_decode(data), fallback_title=path.stem)
    elif kind == "md":
        result = extract_markdown(_decode(data), fallback_title=path.stem)
    elif kind == "txt":
        result = extract_text(_decode(data), fallback_title=path.stem)
    else:
        raise ExtractionError(f"unsupported file type {path.suffix or '(none)'!r}")
    if not any(b.text.strip() for b in result.blocks):
        raise ExtractionError("no text found in the file")
    return result


def _decode(data: bytes) -> str:
    """Decode UTF-8 (with or without BOM); anything else is refused, not guessed."""
    if b"\x00" in data[:8192] and not data.startswith((b"\xff\xfe", b"\xfe\xff")):
        order = _utf16_order(data[:8192])
        if order:
            raise ExtractionError(f"UTF-16 ({order}) text without a byte-order mark; save it as UTF-8 "
                                  "(or as UTF-16 with a BOM)")
        raise ExtractionError("binary content (NUL bytes) in a text file")
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError as exc:
            raise ExtractionError(f"invalid UTF-16 text at byte {exc.start}") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ExtractionError(f"not valid UTF-8 text (byte {exc.start}); convert the file to UTF-8") from None


def _utf16_order(sample: bytes) -> str:
    """'little-endian' or 'big-endian' when NUL bytes sit in every other position, as in UTF-16 of
    mostly Latin text; '' otherwise. Used only to name the problem, never to decode."""
    even, odd = sample[0::2], sample[1::2]
    if len(odd) < 4:
        return ""
    if odd.count(0) >= len(odd) * 0.4 and even.count(0) <= len(even) * 0.05:
        return "little-endian"
    if even.count(0) >= len(even) * 0.4 and odd.count(0) <= len(odd) * 0.05:
        return "big-endian"
    return ""


def _paragraphs(lines: list[str], first_line: int) -> list[tuple[str, int, int]]:
    """Split lines into blank-line separated paragraphs: (text, line_start, line_end)."""
    out: list[tuple[str, int, int]] = []
    buf: list[str] = []
    start = first_line
    for offset, line in enumerate(lines):
        number = first_line + offset
        if line.strip():
            if not buf:
                start = number
            buf.append(line.rstrip())
        elif buf:
            out.append(("\n".join(buf), start, number - 1))
            buf = []
    if buf:
        out.append(("\n".join(buf), start, first_line + len(lines) - 1))
    return out


def extract_text(text: str, *, fallback_title: str) -> Extracted:
    lines = text.splitlines()
    blocks = [Block(t, (), None, s, e) for t, s, e in _paragraphs(lines, 1)]
    return Extracted(title=fallback_title, blocks=blocks)


def extract_markdown(text: str, *, fallback_title: str) -> Extracted:
    """Paragraph blocks under their heading path; fenced code stays in one block."""
    lines = text.splitlines()
    blocks: list[Block] = []
    path: list[tuple[int, str]] = []
    title = ""
    segment: list[str] = []
    segment_start = 1
    in_fence = False

    def flush(end_line: int) -> None:
        heading = tuple(h for _, h in path)
        for para, s, e in _paragraphs(segment, segment_start):
            blocks.append(Block(para, heading, None, s, e))

    for number, line in enumerate(lines, start=1):
        if _FENCE.match(line):
            in_fence = not in_fence
        heading = None if in_fence else _md_heading(line)
        if heading:
            flush(number - 1)
            level, name = heading
            path = [(lvl, h) for lvl, h in path if lvl < level] + [(level, name)]
            if level == 1 and not title:
                title = name
            segment, segment_start = [], number + 1
        else:
            segment.append(line)
    flush(len(lines))
    return Extracted(title=title or fallback_title, blocks=blocks)


def _md_heading(line: str) -> tuple[int, str] | None:
    """(level, name) when ``line`` is an ATX heading (``## Name ##``), else None.

    Plain string work on purpose: the regex this replaces (``(.+?)\\s*#*\\s*$``)
    backtracked cubically, so one 4 KB line of spaces took over a minute. A "heading"
    longer than MAX_HEADING_CHARS is kept as text: every chunk under a heading
    repeats it, so a 10 MB heading line would be stored thousands of times.
    """
    level = len(line) - len(line.lstrip("#"))
    if not 1 <= level <= 6 or line[level:level + 1] not in (" ", "\t"):
        return None
    name = line[level:].strip()
    closed = name.rstrip("#")
    if closed != name and (not closed or closed[-1] in " \t"):
        name = closed.rstrip()
    if not name or len(name) > MAX_HEADING_CHARS:
        return None
    return level, name


def extract_json(text: str, *, fallback_title: str) -> Extracted:
    """Values only: each object's scalar values become one block under its key path.

    Numbers keep the text they are written with (``4.0`` stays ``4.0``, ``1e3`` stays ``1e3``),
    and each block's lines are those its values are on.
    """
    items = text.count(",") + text.count("[") + text.count("{")
    if items > MAX_JSON_ITEMS:
        raise ExtractionError(f"JSON with about {items:,} items (more than {MAX_JSON_ITEMS:,}): a JSON bomb or "
                              "a data dump, not a document; split it or convert the text to .txt/.md")
    duplicates: dict[int, tuple[dict, list[str]]] = {}
    try:
        doc = json.loads(text, object_pairs_hook=lambda pairs: _json_object(pairs, duplicates),
                         parse_int=_Number, parse_float=_Number, parse_constant=_not_json)
    except json.JSONDecodeError as exc:
        raise ExtractionError(f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
    except RecursionError:
        raise ExtractionError(f"JSON nested deeper than {MAX_JSON_DEPTH} levels") from None
    groups: list[tuple[tuple[str, ...], list[tuple[str, int]]]] = []
    _walk_json(doc, (), groups, _LineLocator(text), depth=0)
    if duplicates:
        raise ExtractionError(_duplicates_reason(doc, duplicates))
    blocks = [Block("\n".join(v for v, _ in values), heading, None, min(line for _, line in values),
                    max(line for _, line in values)) for heading, values in groups]
    title = doc.get("title") or doc.get("name") if isinstance(doc, dict) else None
    return Extracted(title=title if isinstance(title, str) and title.strip() else fallback_title, blocks=blocks)


class _Number(str):
    """A JSON number as written in the file."""


def _not_json(constant: str) -> None:
    raise ExtractionError(f"{constant} is not a JSON value (JSON has no NaN or Infinity); write it as a string "
                          "or leave the key out")


def _walk_json(node: object, path: tuple[str, ...], groups: list[tuple[tuple[str, ...], list[tuple[str, int]]]],
               locator: _LineLocator, *, depth: int) -> None:
    """Each container's scalar values, with their lines, as one group; containers below, each its own.

    Values are located in the order they are written, so every value's line is found after
    the one before it; a container's group comes before the groups of the containers in it.
    """
    if depth > MAX_JSON_DEPTH:
        raise ExtractionError(f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
    if isinstance(node, (dict, list)):
        entries = (node.items() if isinstance(node, dict)
                   else ((f"[{index}]", value) for index, value in enumerate(node)))
        scalars: list[tuple[str, int]] = []
        groups.append((path, scalars))
        at = len(groups)
        for key, value in entries:
            if isinstance(value, (dict, list)):
                part = _heading_part(str(key)) if isinstance(node, dict) else key
                _walk_json(value, path + (part,), groups, locator, depth=depth + 1)
            elif _scalar(value):
                scalars.append((_scalar(value), locator.find(value)))
        if not scalars:
            del groups[at - 1]
    elif _scalar(node):
        groups.append((path, [(_scalar(node), locator.find(node))]))


def _json_object(pairs: list[tuple[str, object]], duplicates: dict[int, tuple[dict, list[str]]]) -> dict:
    """An object as ``json.loads`` builds it, noting the keys that occur in it more than once.

    Python keeps the last value of a repeated key and drops the others without a word;
    a document that says two things under one key is ambiguous, so ingest refuses it.
    The object itself is kept with its keys, so its id cannot be reused by another.
    """
    obj = dict(pairs)
    if len(obj) < len(pairs):
        counts: dict[str, int] = {}
        for key, _ in pairs:
            counts[key] = counts.get(key, 0) + 1
        duplicates[id(obj)] = (obj, [key for key, n in counts.items() if n > 1])
    return obj


def _duplicates_reason(doc: object, duplicates: dict[int, tuple[dict, list[str]]]) -> str:
    """The first repeated key in document order, with its JSON path, and how many more there are."""
    found: list[tuple[str, str]] = []  # (JSON path of the key, key)
    stack: list[tuple[object, str]] = [(doc, "$")]
    while stack:  # depth-first in document order; _walk_json has already bounded the depth
        node, where = stack.pop()
        if isinstance(node, dict):
            found += [(_json_path(where, key), key) for key in duplicates.get(id(node), (None, []))[1]]
            children = [(value, _json_path(where, key)) for key, value in node.items()]
        else:
            children = [(value, f"{where}[{index}]") for index, value in enumerate(node)]  # type: ignore[arg-type]
        stack += [child for child in reversed(children) if isinstance(child[0], (dict, list))]
    path, key = found[0]  # an object dropped with its repeated key has a parent that is found
    if len(path) > MAX_JSON_PATH_CHARS:
        path = "$…" + path[-MAX_JSON_PATH_CHARS:]
    more = len(found) - 1
    also = f" (and {more} more repeated key{'' if more == 1 else 's'})" if more else ""
    return (f"duplicate JSON key {json.dumps(_cut(key), ensure_ascii=False)} at {path}{also}: JSON keeps only "
            "the last value of a repeated key and drops the others; rename or merge the repeated keys")


def _json_path(where: str, key: str) -> str:
    """``where`` extended by ``key``: ``.name`` for plain names, ``["a key"]`` otherwise."""
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key) and len(key) <= MAX_JSON_KEY_CHARS:
        return f"{where}.{key}"
    return f"{where}[{json.dumps(_cut(key), ensure_ascii=False)}]"


def _cut(key: str) -> str:
    return key if len(key) <= MAX_JSON_KEY_CHARS else key[:MAX_JSON_KEY_CHARS - 1] + "…"


def _heading_part(key: str) -> str:
    """A key as one level of a heading path. Every block below repeats the whole path, so a
    hostile file with megabyte keys nested 60 deep would otherwise store them thousands of times."""
    return key if len(key) <= MAX_HEADING_CHARS else key[:MAX_HEADING_CHARS - 1] + "…"


def _scalar(value: object) -> str:
    if isinstance(value, bool) or value is None:
        return ""
    if isinstance(value, (int, float, str)):
        return str(value).strip()
    return ""


class _LineLocator:
    """Finds the line of each value, scanning forward so repeated values map in order.

    Linear: newlines are counted only between successive finds, and a value that
    is not found (written with other escapes, or met out of order) costs a search
    of SEARCH_WINDOW characters, not of the rest of the file.
    """

    SEARCH_WINDOW = 1 << 16

    def __init__(self, text: str) -> None:
        self.text = text
        self.cursor = 0
        self.line = 1

    def find(self, value: str) -> int:
        if isinstance(value, _Number):
            needles = [value]
        else:
            needles = [json.dumps(value, ensure_ascii=False), json.dumps(value)]
        for needle in needles:
            at = self.text.find(needle, self.cursor, self.cursor + self.SEARCH_WINDOW + len(needle))
            if at >= 0:
                self.line += self.text.count("\n", self.cursor, at)
                self.cursor = at + len(needle)
                self.line += needle.count("\n")
                break
        return self.line
