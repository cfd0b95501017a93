"""Codes and names: as the passages write them, those no passage mentions, versions, and their series."""

from __future__ import annotations

import re
from itertools import takewhile

from core.text import code_shape
from generation.reader.passages import Passage
from generation.reader.words import _CODE, _DOTTED, _is_code, _plain, current


# A code written with hyphens ("PX-100", "RS-232", "KX-PX100-01"), and one typed without ("px100"): letters and digits
_HYPHENED = re.compile(r"(?<![\w-])(?=[\w-]*[A-Za-z])(?=[\w-]*\d)\w+(?:-\w+)+(?![\w-])")
_BARE_CODE = re.compile(r"(?<![\w-])(?=\w*[A-Za-z])(?=\w*\d)\w+(?![\w-])")
_DEFINITION = r"^[\s*_`#>|-]*{code}[\s*_`|]*(?:[–—:=|-]|\s+(?:{defines})\b)"


def _as_written(texts: list[str], passages: list[Passage]) -> list[str]:
    """``texts`` with each code of four or more characters they type without hyphens spelt as the passages write it:
    "px100" is "PX-100", "rs232" "RS-232"; words are matched as written."""
    written = {_plain(m): m for p in passages for m in _HYPHENED.findall(p.text)}
    if not written:
        return texts

    def spelt(m: re.Match) -> str:  # a short one may be another code ("s12" need not be "S1-2")
        return written.get(_plain(m[0]), m[0]) if len(m[0]) > 3 else m[0]

    return [_BARE_CODE.sub(spelt, text) for text in texts]


def unmentioned(question: str, passages: list[Passage]) -> list[str]:
    """The codes and names of ``question`` ("MTBF", "QoS", "E07") that no passage mentions, in its text or
    under its heading path and title: passages that never name what is asked about cannot answer it. Case,
    hyphens and dots aside ("PX100" is "PX-100")."""
    read = _plain(" ".join(f"{p.under} {p.text}" for p in passages))
    cores = {code: _code_core(code) for code in _CODE.findall(question)}
    return [code for code, core in cores.items() if _is_code(core) and _plain(core) not in read]


def _code_core(code: str) -> str:
    """A code without the ordinary words a compound joins to it with hyphens, as Dutch and German write them
    ("M12-stekker", "USB-Anschluss": "M12", "USB"); a word is ordinary when it is in lower case, or capitalised
    only at its start."""
    parts = code.split("-")
    while len(parts) > 1 and _ordinary(parts[-1]):
        parts.pop()
    while len(parts) > 1 and _ordinary(parts[0]):
        parts.pop(0)
    return "-".join(parts)


def _ordinary(part: str) -> bool:
    return len(part) > 1 and part.isalpha() and part[1:].islower()


def versions(question: str) -> set[str]:
    """The versions and decimals ``question`` names ("2.4.1", "10.8")."""
    return set(_DOTTED.findall(question))


def version_order(versions: set[str], under: str, text: str) -> int:
    """Where a passage is read for a question naming ``versions``: 0 when it opens with them (its heading path or
    first line names each: "Version 2.4.1 - released …"), 1 when it names them further on ("fixed in 2.4.1"), 2 when
    not; 0 for a question naming none."""
    if not versions:
        return 0
    first = next((line for line in text.splitlines() if line.strip()), "")
    if versions <= set(_DOTTED.findall(f"{under}\n{first}")):
        return 0
    return 1 if versions <= set(_DOTTED.findall(text)) else 2


def _defines(text: str, code: str) -> bool:
    """Whether ``text`` opens with ``code`` and what it is: "**E04 – Network error.** …", "MTBF: mean time …"."""
    pattern = _DEFINITION.format(code=re.escape(code), defines=current().defines)
    return re.match(pattern, text, re.IGNORECASE) is not None


def _series(code: str) -> tuple[str, str]:
    """A code's series: its shape and the letters it opens with ("e05" and "e06": ("A9", "e"); "rs-485" and "ax-200"
    are of two)."""
    return code_shape(code), "".join(takewhile(str.isalpha, code))


def _lettered_code(word: str) -> bool:
    """A code of letters and digits ("e05", "x3", "ax-200"), a stem as ``stems`` gives it; not a version."""
    return any(ch.isdigit() for ch in word) and any(ch.isalpha() for ch in word)
