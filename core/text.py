"""Free text: checks on what users type (questions, topics, notes). Words by language: ``core.language``."""

from __future__ import annotations

import re
import unicodedata

_SURROGATE = re.compile("[\ud800-\udfff]")
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")  # control characters but tab and line breaks


# Words of chat typed in capitals that never name anything in the sources ("OK, and how do I fix it?").
CHAT_CAPITALS = frozenset("ok okay fyi btw asap pls plz thx tbh imo".split())


def code_shape(code: str) -> str:
    """A code's shape: its letters "A", its digits "9" ("E05" and "e06": "A9"; "2.4.1": "9.9.9")."""
    return re.sub(r"[0-9]+", "9", re.sub(r"[A-Za-z]+", "A", code))


def is_code_or_name(word: str) -> bool:
    """A code or a name ("E04", "PX-100", "MQTT", "RESET", "QoS", "IRC-Netzwerk"): a digit, or a part between
    hyphens with more than one capital letter; not a word of chat in capitals ("OK", "FYI"). A capital that only
    opens each part is spelling, not a name: German writes every noun so ("Duplex-Einstellung")."""
    if word.lower() in CHAT_CAPITALS:
        return False
    return any(ch.isdigit() for ch in word) or any(sum(ch.isupper() for ch in part) > 1 for part in word.split("-"))


class TextRejected(ValueError):
    """The text cannot be used; the message names what was wrong."""


def unpaired_surrogates(text: str) -> bool:
    """True when ``text`` holds lone UTF-16 surrogates: from JSON ``"\\ud800"``, or from
    undecodable bytes in a command line (Python's surrogateescape). SQLite and the
    tokenizers refuse such text, so it must be stopped at the door."""
    return _SURROGATE.search(text) is not None


def user_text(value: str, *, what: str, max_chars: int, collapse: bool = True) -> str:
    """``value`` with control characters (NUL, escape, bell …; not tabs and line breaks) turned into spaces
    and outer whitespace stripped (``collapse``: every run of whitespace becomes one space).

    Raises ``TextRejected`` naming ``what`` when the result is empty, longer than
    ``max_chars``, or not valid Unicode.
    """
    if unpaired_surrogates(value):
        raise TextRejected(
            f"the {what} contains characters that are not valid Unicode (unpaired surrogates, "
            "e.g. from bytes that are not UTF-8)"
        )
    text = _CONTROL.sub(" ", value)
    text = " ".join(text.split()) if collapse else text.strip()
    if not any(unicodedata.category(c)[0] not in "ZC" for c in text):  # nothing visible: spaces, zero widths
        raise TextRejected(f"the {what} is empty")
    if len(text) > max_chars:
        raise TextRejected(f"the {what} is {len(text)} characters long; the limit is {max_chars}")
    return text
