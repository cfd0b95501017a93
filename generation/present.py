"""Turning answers and documents into safe HTML for the pages.

Everything that reaches a page from a model or a document is escaped (answers)
or sanitised with nh3 after the Markdown conversion (documents). The only
markup we add ourselves is the ``[S#]`` links, built around already-escaped text.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import markdown
import nh3
from django.urls import reverse
from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe

from retrieval.models import QueryLog
from retrieval.services.gate import NO_EVIDENCE_HINT
from sources.selectors import access_contacts, readable_chunks, readable_collections

_MARKER = re.compile(r"\[(S\d+)\]")
_FOOTNOTE_ID = re.compile(r"^fn(?:ref\d*)?:\d+$")  # fnref2:1 is the second reference to footnote 1

BADGES = {
    QueryLog.AnswerClass.NORMAL: ("normal", "Normal answer"),
    QueryLog.AnswerClass.LOW_CONFIDENCE: ("low", "Low confidence: limited source coverage"),
    QueryLog.AnswerClass.NO_EVIDENCE: ("none", "No evidence in your sources"),
}


@dataclass(frozen=True)
class SourceEntry:
    label: str
    title: str
    path: str
    heading: str
    page: int | None
    lines: tuple[int, int]
    score: float
    url: str  # the source viewer at this chunk; "" if the viewer may no longer read it


def source_entries(citations: list[dict], viewer: Any) -> list[SourceEntry]:
    """The cited chunks, each with a link to the viewer when ``viewer`` can still read that source."""
    ids = [c.get("chunk_id") for c in citations]
    readable = dict(readable_chunks(viewer).filter(pk__in=ids).values_list("pk", "source_id"))
    entries = []
    for c in citations:
        source_id = readable.get(c.get("chunk_id"))
        url = (f"{reverse('sources:detail', args=[source_id])}?chunk={c['chunk_id']}#chunk-{c['chunk_id']}"
               if source_id else "")
        lines = c.get("lines") or [0, 0]
        entries.append(SourceEntry(label=str(c.get("id", "")), title=str(c.get("title") or c.get("source", "")),
                                   path=str(c.get("source", "")), heading=str(c.get("heading") or ""),
                                   page=c.get("page"), lines=(lines[0], lines[-1]),
                                   score=float(c.get("score") or 0.0), url=url))
    return entries


def answer_html(text: str, labels: set[str]) -> SafeString:
    """The answer, escaped, with each known ``[S#]`` marker turned into a link to its source entry."""
    def link(match: re.Match) -> str:
        label = match.group(1)
        if label not in labels:
            return match.group(0)
        return format_html('<a class="cite" href="#source-{0}">[{0}]</a>', label)

    paragraphs = [p for p in escape(text).split("\n\n") if p.strip()]
    return mark_safe("".join(f"<p>{_MARKER.sub(link, p).replace(chr(10), '<br>')}</p>" for p in paragraphs))  # noqa: S308


def answer_context(row: QueryLog, viewer: Any) -> dict[str, Any]:
    """Everything the answer partial shows for one query-log row."""
    entries = source_entries(row.citations, viewer)
    badge_class, badge_label = BADGES.get(row.answer_class, ("failed", "Failed"))
    # A source without a link is one the viewer cannot read now. Only the asker could read it when
    # the question was asked; an auditor looking at someone else's answer perhaps never could.
    unreadable = "no longer readable" if row.user_id == getattr(viewer, "pk", None) else "not readable by you"
    return {"row": row, "sources": entries, "badge_class": badge_class, "badge_label": badge_label,
            "unreadable_label": unreadable,
            "answer_html": answer_html(row.answer, {e.label for e in entries}),
            "hint": NO_EVIDENCE_HINT if row.refusal == "gate" else "",
            "feedback": list(row.feedback.select_related("user").order_by("-created_at", "-pk"))}


def access_context(viewer: Any) -> dict[str, Any]:
    """What the ask page says before a question: the collections the viewer reads, and whom to ask for more."""
    names = list(readable_collections(viewer).order_by("name").values_list("name", flat=True))
    return {"readable_names": names, "reads_everything": bool(getattr(viewer, "is_superuser", False)),
            "access_contacts": [n for n in access_contacts() if n != viewer.get_username()]}


ALLOWED_TAGS = {"h1", "h2", "h3", "h4", "h5", "h6", "p", "br", "hr", "ul", "ol", "li", "strong", "em", "code", "pre",
                "blockquote", "table", "thead", "tbody", "tr", "th", "td", "sup", "sub", "a", "div", "span", "del"}


def _keep_attribute(tag: str, attribute: str, value: str) -> str | None:
    # Footnote anchors need their ids; any other id could clobber the page's own elements.
    if attribute == "id":
        return value if _FOOTNOTE_ID.match(value) else None
    if attribute == "href" and not (value.startswith("#fn") or value.startswith("#fnref")):
        return None  # a generated document links nowhere but its own footnotes
    return value


def document_html(text: str) -> SafeString:
    """Markdown (with footnotes and tables) → HTML that nh3 has reduced to harmless tags."""
    raw = markdown.markdown(text, extensions=["footnotes", "tables", "sane_lists"])
    clean = nh3.clean(raw, tags=ALLOWED_TAGS, attributes={"*": {"id", "class"}, "a": {"href", "title"}},
                      attribute_filter=_keep_attribute, link_rel=None, url_schemes={"http", "https"})
    return mark_safe(clean)  # noqa: S308 (sanitised by nh3)
