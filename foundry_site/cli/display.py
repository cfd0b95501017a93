"""Making stored text safe to print on a terminal, and database errors readable.

Everything a ``foundry`` command prints on stdout passes through ``TerminalSafe``
(``safe_text``), and every one-line field taken from a document (file name, title,
heading, quote, reason) through ``safe`` first. A document is untrusted input: its
text must not be able to clear, retitle or recolour the terminal it is shown on.
"""

from __future__ import annotations

import json
import os
import re
from io import TextIOBase
from pathlib import Path
from typing import Any, TextIO

from django.conf import settings
from django.core.management import CommandError
from django.db import DatabaseError

# C0 and C1 control characters and DEL: ESC starts the sequences that move the cursor,
# clear the screen, recolour or retitle the terminal (and C1 CSI/OSC do the same in one
# character); CR and BS overwrite what was printed. Newline and tab lay text out.
_CONTROL = "\x00-\x08\x0b-\x1f\x7f-\x9f"
# In a one-line field (file name, title, heading) newline and tab are unsafe too: they
# fake extra rows in a report. So are the Unicode bidirectional overrides, which
# reorder what is shown; in running text (a chunk, an answer) right-to-left scripts
# use them legitimately and they end at the line, so prose keeps them.
_UNSAFE = re.compile(f"[{_CONTROL}\t\n\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_UNSAFE_IN_TEXT = re.compile(f"[{_CONTROL}]")


def _escape(match: re.Match[str]) -> str:
    return match.group().encode("unicode_escape").decode("ascii")


def _valid(text: str) -> str:
    return text.encode("utf-8", "backslashreplace").decode("utf-8")  # lone surrogates from odd file names


def safe(text: str) -> str:
    """``text`` as one line for a terminal: unsafe characters shown as escapes (``\\n``, ``\\x1b``, ``\\u202e``)."""
    return _UNSAFE.sub(_escape, _valid(text))


def safe_text(text: str) -> str:
    """Running text (chunks, answers, prompts) for a terminal: lines and tabs kept, every other
    control character shown as an escape (ESC prints as the four characters ``\\x1b``).

    Idempotent: escaping escaped text changes nothing.
    """
    return _UNSAFE_IN_TEXT.sub(_escape, _valid(text))


def safe_json(value: Any) -> str:
    """``value`` as one line of JSON with no character a terminal acts on.

    ``json.dumps`` escapes C0 controls itself but leaves DEL, C1 controls and the
    bidirectional overrides raw (with ``ensure_ascii=False``); they can only occur
    inside strings, where ``\\u009b`` means the same character, so the parsed value
    is unchanged.
    """
    text = json.dumps(value, ensure_ascii=False)
    return _UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


class TerminalSafe:
    """A command's stdout with ``safe_text`` applied to everything written to it.

    The one place that guarantees a ``foundry`` command cannot pass a terminal
    control sequence from a document (or a model's answer) to the user's terminal,
    whatever the command prints.
    """

    def __init__(self, out: TextIO | TextIOBase) -> None:  # TextIOBase: a management command's OutputWrapper
        self._out = out

    def write(self, text: str, *args: Any, **kwargs: Any) -> Any:
        return self._out.write(safe_text(text), *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._out, name)


# sqlite-vec stores vectors in blocks of 1,024 (1.5 MB at 384 dimensions) and reports a failed
# block allocation as "Could not insert a new vector chunk", hiding SQLite's "disk is full".
VEC0_BLOCK = 8 * 1024 * 1024


def output_file_check(path: Path, *, option: str) -> None:
    """Refuse an output path that cannot take a file before any work is done; ``option`` names the argument."""
    if not path.name or path.is_dir():
        raise CommandError(f"{option}: {path} is a folder; give a file path")
    if not path.parent.is_dir():
        raise CommandError(f"{option}: folder {path.parent} does not exist")
    if not os.access(path.parent, os.W_OK):
        raise CommandError(f"{option}: folder {path.parent} is not writable")


def _space_left(path: str) -> int:
    """Room the database may still grow by: free space on its filesystem, or less under a page limit."""
    from sources.vectorstore import page_limit_room

    try:
        stat = os.statvfs(os.path.dirname(os.path.abspath(path)))
    except OSError:
        return VEC0_BLOCK  # cannot tell: do not claim a full disk
    room = page_limit_room()
    free = stat.f_bavail * stat.f_frsize
    return free if room is None else min(free, room)


def database_error_message(exc: DatabaseError) -> str:
    """What went wrong with the SQLite file and what to do about it, for a database error (on PostgreSQL: the
    server's own message, which names its cause, with the database it came from)."""
    path = settings.DATABASES["default"]["NAME"]
    text = str(exc)
    if settings.DATABASES["default"]["ENGINE"] != "foundry_site.db":
        return f"Database error on PostgreSQL database {path} (FOUNDRY_DATABASE_URL): {text}"
    after = (
        "Each file is stored in one transaction, so nothing half-written was kept; "
        "`foundry check` verifies the index and `foundry ingest` again finishes the work."
    )
    if "disk is full" in text or ("Could not insert a new vector chunk" in text and _space_left(path) < VEC0_BLOCK):
        return f"Disk full: SQLite could not write the knowledge base {path} ({text}). Free some space. {after}"
    if "locked" in text or "busy" in text:
        timeout = settings.DATABASES["default"].get("OPTIONS", {}).get("timeout", 5)
        return (
            f"The knowledge base {path} stayed locked by another process for more than {timeout} s "
            f"({text}): another ingest or worker is writing. Run the command again when it has finished. {after}"
        )
    if "readonly" in text or "read-only" in text:
        return (
            f"The knowledge base {path} is read-only ({text}): this user may not write the file, or the folder "
            f"that holds it (SQLite writes its journal there). Give write permission, or point FOUNDRY_DB at a "
            f"copy it may write. {after}"
        )
    if "disk I/O error" in text:
        return (
            f"Disk I/O error writing the knowledge base {path} ({text}): a failing or full disk, or a file "
            f"size limit. Fix the storage. {after}"
        )
    if "malformed" in text or "not a database" in text:
        return (
            f"The knowledge base file {path} is damaged ({text}). Run `foundry check`; restore it from a "
            "backup, or delete it and run `foundry ingest` to rebuild the index from the documents."
        )
    if "no such table" in text:
        return (
            f"The knowledge base {path} is not set up ({text}): run `.venv/bin/python manage.py migrate` "
            "with the same FOUNDRY_HOME first (`make run` does it for the default home)."
        )
    return f"Database error on {path}: {text}"
