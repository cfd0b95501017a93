"""Making stored text safe to print on a terminal, and database errors readable."""
from __future__ import annotations

import re

from django.conf import settings
from django.db import DatabaseError

# C0 and C1 control characters, DEL, and the Unicode bidirectional overrides: in a
# file name or title they could move the cursor, recolour or retitle the terminal
# (ESC sequences), fake extra rows in a report (newline), or reorder what is shown.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def safe(text: str) -> str:
    """``text`` for a terminal: unsafe characters shown as escapes (``\\n``, ``\\x1b``, ``\\u202e``)."""
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")  # lone surrogates from odd file names
    return _UNSAFE.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def database_error_message(exc: DatabaseError) -> str:
    """What went wrong with the SQLite file and what to do about it, for a database error."""
    path = settings.DATABASES["default"]["NAME"]
    text = str(exc)
    after = ("Each file is stored in one transaction, so nothing half-written was kept; "
             "`foundry check` verifies the index and `foundry ingest` again finishes the work.")
    if "disk is full" in text:
        return f"Disk full: SQLite could not write the knowledge base {path} ({text}). Free some space. {after}"
    if "locked" in text or "busy" in text:
        timeout = settings.DATABASES["default"].get("OPTIONS", {}).get("timeout", 5)
        return (f"The knowledge base {path} stayed locked by another process for more than {timeout} s "
                f"({text}): another ingest or worker is writing. Run the command again when it has finished. {after}")
    if "disk I/O error" in text:
        return (f"Disk I/O error writing the knowledge base {path} ({text}): a failing or full disk, or a file "
                f"size limit. Fix the storage. {after}")
    if "malformed" in text or "not a database" in text:
        return (f"The knowledge base file {path} is damaged ({text}). Run `foundry check`; restore it from a "
                "backup, or delete it and run `foundry ingest` to rebuild the index from the documents.")
    return f"Database error on {path}: {text}"
