"""JSON: every scalar value, labelled with its key path (``network.ip_address: 192.168.10.50``).

Values only, no JSON syntax: each container's scalar values form one block under the
container's key path, each on its own line as ``key.path: value``, so a reader can check
which setting a value is and retrieval can match the key's words ("IP address").
"""

from __future__ import annotations

import json
import re

from sources.services.extract.blocks import MAX_HEADING_CHARS, Block, Extracted, ExtractionError

MAX_JSON_DEPTH = 64
# A JSON "bomb" is a small file whose parsed form is far larger than the file:
# ``[[],[],…]`` or ``[0,0,…]`` cost ~20 times their size once parsed. Refuse files
# with more items than any document needs, counted before parsing.
MAX_JSON_ITEMS = 2_000_000
# A reason names a repeated key and its path; hostile keys can be megabytes long.
MAX_JSON_KEY_CHARS = 80
MAX_JSON_PATH_CHARS = 500
# Every value repeats its key path; 60 levels of 80-character keys must not make each line 5 KB.
MAX_LABEL_CHARS = 160


def extract_json(text: str, *, fallback_title: str) -> Extracted:
    """Each object's scalar values become one block under its key path, one ``key.path: value`` line each.

    Numbers keep the text they are written with (``4.0`` stays ``4.0``, ``1e3`` stays ``1e3``),
    and each block's lines are those its values are on.
    """
    items = text.count(",") + text.count("[") + text.count("{")
    if items > MAX_JSON_ITEMS:
        raise ExtractionError(
            f"JSON with about {items:,} items (more than {MAX_JSON_ITEMS:,}): a JSON bomb or "
            "a data dump, not a document; split it or convert the text to .txt/.md"
        )
    duplicates: dict[int, tuple[dict, list[str]]] = {}
    try:
        doc = json.loads(
            text,
            object_pairs_hook=lambda pairs: _json_object(pairs, duplicates),
            parse_int=_Number,
            parse_float=_Number,
            parse_constant=_not_json,
        )
    except json.JSONDecodeError as exc:
        raise ExtractionError(f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
    except RecursionError:
        raise ExtractionError(f"JSON nested deeper than {MAX_JSON_DEPTH} levels") from None
    groups: list[tuple[tuple[str, ...], list[tuple[str, int]]]] = []
    _walk_json(doc, (), "", groups, _LineLocator(text), depth=0)
    if duplicates:
        raise ExtractionError(_duplicates_reason(doc, duplicates))
    blocks = [
        Block(
            "\n".join(v for v, _ in values),
            heading,
            None,
            min(line for _, line in values),
            max(line for _, line in values),
        )
        for heading, values in groups
    ]
    title = doc.get("title") or doc.get("name") if isinstance(doc, dict) else None
    return Extracted(title=title if isinstance(title, str) and title.strip() else fallback_title, blocks=blocks)


class _Number(str):
    """A JSON number as written in the file."""


def _not_json(constant: str) -> None:
    raise ExtractionError(
        f"{constant} is not a JSON value (JSON has no NaN or Infinity); write it as a string or leave the key out"
    )


def _walk_json(
    node: object,
    path: tuple[str, ...],
    keys: str,
    groups: list[tuple[tuple[str, ...], list[tuple[str, int]]]],
    locator: _LineLocator,
    *,
    depth: int,
) -> None:
    """Each container's scalar values (``keys.of.value: value``), with their lines, as one group;
    containers below, each its own.

    Values are located in the order they are written, so every value's line is found after
    the one before it; a container's group comes before the groups of the containers in it.
    """
    if depth > MAX_JSON_DEPTH:
        raise ExtractionError(f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
    if isinstance(node, (dict, list)):
        entries = (
            node.items() if isinstance(node, dict) else ((f"[{index}]", value) for index, value in enumerate(node))
        )
        scalars: list[tuple[str, int]] = []
        groups.append((path, scalars))
        at = len(groups)
        for key, value in entries:
            label = _label(keys, str(key), in_list=isinstance(node, list))
            if isinstance(value, (dict, list)):
                part = _heading_part(str(key)) if isinstance(node, dict) else key
                _walk_json(value, path + (part,), label, groups, locator, depth=depth + 1)
            elif _scalar(value):
                scalars.append((f"{_cut_label(label)}: {_scalar(value)}", locator.find(value)))
        if not scalars:
            del groups[at - 1]
    elif _scalar(node):
        groups.append((path, [(_scalar(node), locator.find(node))]))


def _label(keys: str, key: str, *, in_list: bool) -> str:
    """``keys`` extended by one key (``a.b``) or list index (``a[0]``); each key cut to MAX_JSON_KEY_CHARS."""
    if in_list:
        return keys + key
    key = " ".join(_cut(key).split())
    return f"{keys}.{key}" if keys else key


def _cut_label(label: str) -> str:
    return label if len(label) <= MAX_LABEL_CHARS else "…" + label[-(MAX_LABEL_CHARS - 1) :]


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
            assert isinstance(node, list)  # only objects and arrays are stacked, and duplicates put an object in doc
            children = [(value, f"{where}[{index}]") for index, value in enumerate(node)]
        stack += [child for child in reversed(children) if isinstance(child[0], (dict, list))]
    path, key = found[0]  # an object dropped with its repeated key has a parent that is found
    if len(path) > MAX_JSON_PATH_CHARS:
        path = "$…" + path[-MAX_JSON_PATH_CHARS:]
    more = len(found) - 1
    also = f" (and {more} more repeated key{'' if more == 1 else 's'})" if more else ""
    return (
        f"duplicate JSON key {json.dumps(_cut(key), ensure_ascii=False)} at {path}{also}: JSON keeps only "
        "the last value of a repeated key and drops the others; rename or merge the repeated keys"
    )


def _json_path(where: str, key: str) -> str:
    """``where`` extended by ``key``: ``.name`` for plain names, ``["a key"]`` otherwise."""
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key) and len(key) <= MAX_JSON_KEY_CHARS:
        return f"{where}.{key}"
    return f"{where}[{json.dumps(_cut(key), ensure_ascii=False)}]"


def _cut(key: str) -> str:
    return key if len(key) <= MAX_JSON_KEY_CHARS else key[: MAX_JSON_KEY_CHARS - 1] + "…"


def _heading_part(key: str) -> str:
    """A key as one level of a heading path. Every block below repeats the whole path, so a
    hostile file with megabyte keys nested 60 deep would otherwise store them thousands of times."""
    return key if len(key) <= MAX_HEADING_CHARS else key[: MAX_HEADING_CHARS - 1] + "…"


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

    def find(self, value: object) -> int:
        needles: list[str]
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
