"""The chunking settings a source was built with, as one canonical string on ``Source.chunking``.

A source's chunks, and the text embedded with each of them, depend on
``ingest.chunk_tokens``, ``ingest.chunk_overlap_tokens``, ``ingest.window_sentences``
(the sentence windows embedded beside each chunk) and ``embedding.context_model``
(the contextual prefix stored in ``Chunk.context``).
Ingest records the settings that prepared a source, and re-chunks a file whose
recorded settings differ from the configured ones even when its bytes did not
change. The string is ``key=value`` pairs named after the foundry.yaml keys; no
value contains a space or ``=`` (model names are checked against ``MODEL_PATTERN``).
"""

from __future__ import annotations

from collections.abc import Sequence

from django.conf import settings

from core.config import FoundryConfig
from sources.selectors import ChunkingDrift

UNKNOWN = "unknown"
# Keys that only old recorded strings carry, marking how those sources were built (migration
# 0006 marks JSON sources built before values were labelled with their keys, 0010 sources with
# a block cut into pieces joined by spaces, 0011 PDFs read with their running headers and footers, 0012 text
# files titled by their file name, 0013 PDFs whose tables' lines lost their columns, 0014 sources whose blocks were cut
# inside a table's row, 0015 sources whose tables were embedded whole in their sentence windows, 0017 PDFs whose
# furniture and sections were found from line order alone, 0018 text and Markdown sources titled or headed by a
# decoration line, 0019 PDFs read with pypdf, and Word, PowerPoint, Excel and HTML sources whose list numbers,
# definition lists and charts were not read, 0020 sources chunked before a chunk kept the source lines of each of its
# lines, 0023 HTML sources whose list items lost their numbers, 0024 sources whose numbered lists a chunk boundary
# cut from their heading or after an item's number, 0025 sources with lettered lists, whose items were read as
# prose); the value is what every source is built with now.
RETIRED = {
    "json_values": "labelled",
    "split_text": "verbatim",
    "pdf_running": "dropped",
    "txt_title": "first_line",
    "pdf_tables": "cells",
    "table_rows": "whole",
    "table_windows": "rows",
    "pdf_layout": "positions",
    "title_decoration": "skipped",
    "pdf_text": "pdfium",
    "structure": "drawn",
    "line_map": "kept",
    "html_lists": "numbered",
    "list_heads": "repeated",
    "letter_lists": "stepped",
}


def chunking_encode(*, chunk_tokens: int, chunk_overlap_tokens: int, context_model: str, window_sentences: int) -> str:
    """The canonical string for these settings; equal settings always give the same string."""
    return (
        f"chunk_tokens={chunk_tokens} chunk_overlap_tokens={chunk_overlap_tokens} "
        f"context_model={context_model} window_sentences={window_sentences}"
    )


def chunking_of(conf: FoundryConfig) -> str:
    """The chunking settings of one configuration (what ``_prepare`` reads)."""
    return chunking_encode(
        chunk_tokens=conf.ingest.chunk_tokens,
        chunk_overlap_tokens=conf.ingest.chunk_overlap_tokens,
        context_model=conf.embedding.context_model,
        window_sentences=conf.ingest.window_sentences,
    )


def chunking_configured() -> str:
    """The chunking settings foundry.yaml sets for this process."""
    return chunking_of(settings.FOUNDRY)


def chunking_parse(value: str) -> dict[str, str]:
    """``{key: value}`` of a recorded string; empty for a source whose settings were never recorded."""
    return dict(pair.partition("=")[::2] for pair in value.split())


def chunking_changes(old: str, new: str) -> list[tuple[str, str, str]]:
    """``(key, old value, new value)`` for every setting that differs, in the string's order."""
    before, after = chunking_parse(old), chunking_parse(new)
    keys = list(dict.fromkeys([*after, *before]))
    return [
        (k, before.get(k, UNKNOWN), after.get(k, RETIRED.get(k, UNKNOWN)))
        for k in keys
        if before.get(k) != after.get(k)
    ]


def chunking_changes_text(old: str, new: str) -> str:
    """``chunk_tokens 200 → 128, context_model none → openai/gpt-4o-mini``."""
    return ", ".join(f"{key} {a} → {b}" for key, a, b in chunking_changes(old, new))


def rechunk_reason(*, previous: str | None, prepared: str, configured: str) -> str:
    """The report's reason for a stored file: why the same bytes were chunked again, and whether
    the worker that prepared it read another foundry.yaml than this one. Empty when neither holds.

    ``previous``: the recorded settings of the ingested source with the same sha256 (None when
    there is none); ``prepared``: what the payload was built with; ``configured``: this foundry.yaml.
    """
    notes = []
    if previous is not None and previous != prepared:
        notes.append(f"re-chunked: chunking settings changed ({chunking_changes_text(previous, prepared)})")
    if not prepared:
        notes.append(
            "prepared by a worker that does not record its chunking settings (the next foundry ingest re-chunks it)"
        )
    elif prepared != configured:
        differ = ", ".join(f"{key} {a}" for key, a, _ in chunking_changes(prepared, configured))
        sets = ", ".join(f"{key} {b}" for key, _, b in chunking_changes(prepared, configured))
        notes.append(
            f"prepared with {differ} but this foundry.yaml sets {sets}; every worker must read "
            "the same foundry.yaml (the next foundry ingest re-chunks it)"
        )
    return "; ".join(notes)


def chunking_drift_warning(*, configured: str, drift: Sequence[ChunkingDrift]) -> str:
    """What ``foundry check`` and ``foundry status`` print for sources chunked with other settings,
    with the re-ingest commands that re-chunk exactly those sources."""
    counts: dict[str, int] = {}
    for group in drift:
        counts[group.chunking] = counts.get(group.chunking, 0) + group.sources
    total = sum(counts.values())
    changes = "; ".join(
        f"{chunking_changes_text(old, configured)} ({n} source{'' if n == 1 else 's'})" for old, n in counts.items()
    )
    commands = list(dict.fromkeys(group.reingest_command for group in drift))
    # A retired key (``RETIRED``) marks how a source was built; foundry.yaml has no such key to set back.
    settable = any(key not in RETIRED for old in counts for key, _, _ in chunking_changes(old, configured))
    lines = [
        f"{total} source{' was' if total == 1 else 's were'} chunked with other settings than foundry.yaml "
        f"sets: {changes}. Search works, but they keep their old chunks until they are re-ingested.",
        "Re-ingest to re-chunk them (only files whose settings or bytes differ are redone):",
        *(f"  {command}" for command in commands),
    ]
    return "\n".join([*lines, "or set those keys back in foundry.yaml."] if settable else lines)
