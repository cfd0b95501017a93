"""The extractive writer: an approved spec's outline filled with verbatim quotes of the sources, no LLM.

The spec's ``##`` headings (``DEFAULT_OUTLINE`` when it has none) are the document's sections,
in the spec's order. Next to the database (``sections_prepare``) each section retrieves for
"topic: heading" (the retrieval gate applies per section); on any machine (``document_write``)
the reader picks each section's best units, never one an earlier section quoted, and lists them
in source order, each with a footnote naming the unit's own lines. A section with nothing above
the reader's threshold says so instead of being padded. Conflicts between the sources come
first, with the spec's own notes on which source takes precedence.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from core.units import passage_units, table_rule
from generation.footnotes import footnote_format
from generation.grounded_markdown import markup_escape
from generation.reader import Passage, Quote, Reading, read, unit_key
from retrieval.services.retrieve import Candidate, retrieve

DEFAULT_OUTLINE = ("Overview", "Details", "Requirements and limits")
SECTION_UNITS = 6  # units quoted per section at most: those within SECTION_MARGIN of the best and above the threshold
SECTION_MARGIN = 0.3
NOTHING_FOUND = "_The sources hold nothing on this section closely enough to quote._"
_HEADING = re.compile(r"^##\s+(.+?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_PRECEDENCE = re.compile(r"\b(precedence|priority|prefer|authoritative|overrides?|supersedes?|wins?)\b", re.I)


def spec_outline(body: str) -> list[str]:
    """The ``##`` headings of a spec in order (not inside code fences), or DEFAULT_OUTLINE."""
    headings, fenced = [], False
    for line in body.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
        match = None if fenced else _HEADING.match(line)
        if match and match.group(1) not in headings:
            headings.append(match.group(1))
    return headings or list(DEFAULT_OUTLINE)


def precedence_notes(body: str) -> list[str]:
    """The spec's sentences and list items that say which sources take precedence (shown with the
    conflicts), each on one line however the spec wraps it."""
    return [
        " ".join(unit.text.split()).lstrip("-*> ").strip()
        for unit in passage_units(body)
        if _PRECEDENCE.search(unit.text) and not unit.text.lstrip().startswith("#")
    ]


def sections_prepare(
    *, topic: str, body: str, collection_ids: list[int] | None, max_passages: int
) -> tuple[list[dict[str, Any]], dict[int, Candidate]]:
    """Per section of the outline: its heading, the gate's verdict and its passages' chunk ids by rank.

    Returns the sections and every candidate found, by chunk id (their texts go into the payload).
    """
    sections, found = [], {}
    for heading in spec_outline(body):
        retrieval = retrieve(question=section_question(topic, heading), collection_ids=collection_ids)
        chosen = retrieval.candidates[:max_passages] if retrieval.gate.passed else []
        found.update({c.chunk.pk: c for c in chosen})
        sections.append({"heading": heading, "gate": retrieval.gate.as_dict(), "chunks": [c.chunk.pk for c in chosen]})
    return sections, found


def section_question(topic: str, heading: str) -> str:
    return f"{topic}: {heading}"


def passage_payload(candidate: Candidate, footnote: str) -> dict[str, Any]:
    chunk = candidate.chunk
    return {
        "chunk_id": chunk.pk,
        "text": chunk.text,
        "footnote": footnote,
        "source": chunk.source.name,
        "ordinal": chunk.ordinal,
        "under": chunk.under,
        "line_start": chunk.line_start,
        "line_end": chunk.line_end,
        "page_start": chunk.page_start,
        "page_end": chunk.page_end,
        "kind": chunk.kind,
        "heading": chunk.heading,
        "ocr_confidence": chunk.ocr_confidence,
        "line_map": chunk.line_map,
    }


def document_write(
    *,
    topic: str,
    title: str,
    sections: Sequence[dict[str, Any]],
    passages: dict[str, dict[str, Any]],
    conflicts: Sequence[str],
    notes: Sequence[str],
    embedding_model: str,
    min_score: float,
) -> tuple[str, dict[str, str], dict[str, Any]]:
    """The document body with ``[S#]`` markers (one label per quote), each label's footnote, and the audit.

    ``passages``: payload passages by chunk id (as a string, JSON keys). Raises nothing: a document
    whose every section is empty has no markers, and the caller fails the run.
    """
    lines = [markup_escape(f"# {title}"), ""]
    if conflicts:
        lines += ["> **Conflicts between the sources** — check before relying on these values:", ">"]
        lines += [f"> {markup_escape(line)}" for text in conflicts for line in text.splitlines()]
        lines += [">", *[f"> Spec: {markup_escape(note)}" for note in notes], ""] if notes else [""]
    footnotes: dict[str, str] = {}
    quoted: set[str] = set()
    audit: list[dict[str, Any]] = []
    for section in sections:
        ranked = [passages[str(cid)] for cid in section["chunks"]]
        reading = read(
            section_question(topic, section["heading"]),
            [_passage(p, rank) for rank, p in enumerate(ranked, start=1)],
            embedding_model=embedding_model,
            max_units=SECTION_UNITS,
            exclude=quoted,
            margin=SECTION_MARGIN,
        )
        kept = [q for q in reading.quotes if q.score >= min_score]
        quoted.update(unit_key(q.unit.text) for q in kept)
        lines += [markup_escape(f"## {section['heading']}"), "", *_section_lines(kept, footnotes, passages), ""]
        audit.append({"heading": section["heading"], **_audit(reading, kept)})
    return "\n".join(lines).rstrip() + "\n", footnotes, {"sections": audit}


def _passage(payload: dict[str, Any], rank: int) -> Passage:
    return Passage(
        str(payload["chunk_id"]),
        payload["text"],
        payload["line_start"],
        payload["line_end"],
        payload["page_start"],
        payload["page_end"],
        rank=rank,
        source=payload["source"],
        ordinal=payload["ordinal"],
        under=payload.get("under", ""),
        line_map=payload.get("line_map"),
    )


def _section_lines(quotes: list[Quote], footnotes: dict[str, str], passages: dict[str, dict[str, Any]]) -> list[str]:
    """Quotes in source order, as blocks: consecutive sentences of a passage run on as a paragraph, list items
    stay a list, table rows stay a table under their header row."""
    if not quotes:
        return [NOTHING_FOUND]
    blocks: list[str] = []
    previous: Quote | None = None
    for quote in sorted(quotes, key=lambda q: (q.passage.source, q.passage.ordinal, q.unit.start)):
        label, kind = f"S{len(footnotes) + 1}", quote.unit.kind
        footnotes[label] = unit_footnote(quote, passages[quote.passage.label])
        marked = markup_escape(f"{quote.quoted if kind == 'sentence' else quote.unit.text} [{label}]")
        continues = (
            previous is not None
            and previous.unit.kind == kind
            and (
                (kind in ("item", "field") and previous.passage is quote.passage)
                or (
                    kind == "sentence"
                    and previous.passage is quote.passage
                    and not quote.passage.text[previous.unit.end : quote.unit.start].strip()
                )
                or (kind == "row" and previous.unit.context == quote.unit.context)
            )
        )
        if continues:
            blocks[-1] += (" " if kind == "sentence" else "\n") + marked
        elif kind == "row" and quote.unit.context:
            blocks.append("\n".join([markup_escape(quote.unit.context), table_rule(quote.unit.context), marked]))
        else:
            blocks.append(marked)
        previous = quote
    return ["\n\n".join(blocks)]


def unit_footnote(quote: Quote, passage: dict[str, Any]) -> str:
    """The passage's footnote (``manual.md §Wiring, p. 3, lines 40-52``) with the quoted unit's own lines."""
    return footnote_format(
        name=passage["source"],
        kind=passage["kind"],
        heading=passage["heading"],
        page_start=passage["page_start"],
        page_end=passage["page_end"],
        lines=quote.lines,
        ocr_confidence=passage["ocr_confidence"],
    )


def _audit(reading: Reading, kept: list[Quote]) -> dict[str, Any]:
    return {"best": round(reading.best, 4), "quoted": [q.as_dict() for q in kept]}
