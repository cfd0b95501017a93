"""Turning answers and documents into safe HTML for the pages.

Everything that reaches a page from a model or a document is rendered as Markdown
with raw HTML escaped (answers, core.markup) or sanitised with nh3 after the
Markdown conversion (documents). The only markup we add ourselves is the ``[S#]``
links, put into text that is already safe.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import markdown
import nh3
from django.conf import settings
from django.utils import translation
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext, gettext_lazy

from core.markup import TEXT_TAGS, markdown_html
from generation.answers.compose import PASSAGES_FOUND as PASSAGES_FOUND_MESSAGE
from generation.answers.language import question_language
from generation.conflict_boxes import conflict_boxes
from generation.models import QueryLog
from sources.models import LINE_UNITS, Chunk, Source, citation_label
from sources.selectors import access_contacts, readable_chunks, readable_collections, uploadable_collections
from sources.viewer import viewer_url

if TYPE_CHECKING:  # django-stubs' type of a lazy translation; a dev requirement only
    from django_stubs_ext import StrOrPromise

_MARKER = re.compile(r"\[(S\d+)\]")
_FOOTNOTE_ID = re.compile(r"^fn(?:ref\d*)?:\d+$")  # fnref2:1 is the second reference to footnote 1

_ = gettext_lazy  # the labels are read when shown, in the language active there (the answer's: _answer.html)
BADGES: dict[str, tuple[str, StrOrPromise]] = {
    QueryLog.AnswerClass.NORMAL: ("normal", _("Normal answer")),
    QueryLog.AnswerClass.LOW_CONFIDENCE: ("low", _("Low confidence: the sources match the question only loosely")),
    QueryLog.AnswerClass.NO_EVIDENCE: ("none", _("No evidence in your sources")),
}
FAILED_BADGE = ("failed", _("Failed"))


@dataclass(frozen=True)
class Outcome:
    """How the page names a withheld answer: its badge and what happened, in words for a web user."""

    badge_class: str
    badge_label: StrOrPromise
    explanation: StrOrPromise
    upload_hint: bool = False  # offer the sources page's upload (the web's "run foundry ingest")
    replaces_text: bool = False  # the explanation says all the stored text says (shown whole in the audit record)


# Why nothing was answered (QueryLog.refusal), told apart: nothing found, found but not
# verified, a name the passages never mention, below the extractive reader's threshold, or the model
# said the sources lack it.
REFUSALS = {
    "gate": Outcome(
        "none",
        _("No evidence in your sources"),
        _("Nothing in the collections you can read matched the question closely enough, so no answer was written."),
        upload_hint=True,
        replaces_text=True,
    ),
    "relevance": Outcome(
        "none",
        _("No evidence in your sources"),
        _("The passages the search found were judged not relevant to the question, so no answer was written."),
        upload_hint=True,
        replaces_text=True,
    ),
    "grounding": Outcome(
        "unverified",
        _("Found, but could not verify"),
        _(
            "Passages were found, but no sentence the model wrote could be verified against them, "
            "so nothing was shown. Read the passages yourself:"
        ),
        replaces_text=True,
    ),
    # The stored text of these two says why (the name never mentioned, no sentence answering it): the line
    # under it only introduces the passages.
    "absent": Outcome("none", _("Not mentioned in your sources"), _("The closest passages:")),
    "reader": Outcome("unverified", _("Found, but no sentence answers it"), _("The closest passages:")),
    "model": Outcome(
        "declined",
        _("Not in your sources"),
        _("The model read the passages found and said they do not contain the answer, so nothing else was shown."),
    ),
}


def _passages_markers() -> list[str]:
    """`` Passages found: `` in every interface language: a refusal names its passages in its question's."""
    markers = []
    for code, _name in settings.LANGUAGES:
        with translation.override(code):
            markers.append(f" {gettext(PASSAGES_FOUND_MESSAGE)} ")
    return list(dict.fromkeys(markers))


def passages_marker(answer: str) -> str | None:
    """The `` Passages found: `` (in whichever language) that ``answer`` lists its passages after, if any."""
    return next((m for m in _passages_markers() if m in answer), None)


_LABELLED = re.compile(r"^(S\d+) (.+)$")


@dataclass(frozen=True)
class FoundPassage:
    label: str
    text: str  # as the answer names it: source, page, lines
    url: str  # the source viewer at the chunk; "" when it cannot be matched or read


def found_passages(row: QueryLog, viewer: Any) -> tuple[str, list[FoundPassage]]:
    """A withheld answer's lead text and its "Passages found", each linked to the viewer at its chunk.

    The stored answer names the passages (``S1 manual.md, § Power, p. 2, lines 4-15; …``, as
    ``answers.compose.passages_found`` writes them); the chunk is the one among the row's retrieved chunks
    that the answer names that way. Answers recorded before locations named the section and the kind
    (``S1 manual.md, p. 2, lines 4-15``) are matched in that form.
    """
    marker = passages_marker(row.answer)
    if marker is None:
        return row.answer, []
    lead, listing = row.answer.split(marker, 1)
    retrieved = {int(hit[0]) for hits in (row.channels or {}).values() for hit in hits if hit}
    chunks = list(readable_chunks(viewer).filter(pk__in=retrieved).select_related("source"))
    found = []
    for part in listing.rstrip(".").split("; "):
        match = _LABELLED.match(part.strip())
        chunk = _listed_chunk(match.group(2), chunks) if match else None
        url = viewer_url(chunk.source_id, chunk.pk) if chunk else ""
        found.append(FoundPassage(label=match.group(1) if match else "", text=part.strip(), url=url))
    return lead.strip(), found


@dataclass(frozen=True)
class SourceEntry:
    label: str
    title: str
    path: str
    location: str  # ``§ Agenda, slide 3, lines 2-4``, ``sheet Pumps, rows 20-45`` … (sources.models.location_text)
    score: float
    url: str  # the source viewer at this chunk; "" if the viewer may no longer read it


def source_entries(citations: list[dict], viewer: Any) -> list[SourceEntry]:
    """The cited chunks, each with a link to the viewer when ``viewer`` can still read that source."""
    ids = [c.get("chunk_id") for c in citations]
    rows = list(readable_chunks(viewer).filter(pk__in=ids).values_list("pk", "source_id", "page_end"))
    readable = {pk: source_id for pk, source_id, _ in rows}
    page_ends = {pk: page_end for pk, _, page_end in rows}  # citations recorded before they had page_end
    entries = []
    for c in citations:
        chunk_id = c.get("chunk_id")
        source_id = readable.get(chunk_id) if chunk_id is not None else None
        if "page_end" not in c and c.get("chunk_id") in page_ends:
            c = {**c, "page_end": page_ends[c["chunk_id"]]}
        url = viewer_url(source_id, c["chunk_id"], c.get("lines")) if source_id else ""
        entries.append(
            SourceEntry(
                label=str(c.get("id", "")),
                title=str(c.get("title") or c.get("source", "")),
                path=str(c.get("source", "")),
                location=citation_label(c),
                score=float(c.get("score") or 0.0),
                url=url,
            )
        )
    return entries


def answer_html(text: str, labels: set[str], anchor: str = "") -> SafeString:
    """The answer as safe Markdown (raw HTML shown as text), each known ``[S#]`` marker a link to its source entry
    (``#<anchor>source-S#``)."""

    def link(match: re.Match) -> str:
        label = match.group(1)
        if label not in labels:
            return match.group(0)
        return format_html('<a class="cite" href="#{1}source-{0}">[{0}]</a>', label, anchor)

    # The sanitised HTML has no attributes (no links, classes or ids), so a marker can only be in text.
    return mark_safe(_MARKER.sub(link, markdown_html(text, line_breaks=True)))  # noqa: S308


def _withheld(row: QueryLog) -> Outcome | None:
    """How the page names ``row``'s withheld answer (``REFUSALS``); None for an answer shown."""
    return REFUSALS.get(row.refusal) if row.answer_class == QueryLog.AnswerClass.NO_EVIDENCE else None


def row_badge(row: QueryLog) -> tuple[str, StrOrPromise]:
    """A query-log row's badge (CSS class, label): its answer class, a withheld answer by why (``REFUSALS``)."""
    outcome = _withheld(row)
    if outcome is not None:
        return outcome.badge_class, outcome.badge_label
    return BADGES.get(row.answer_class, FAILED_BADGE)


def answer_context(row: QueryLog, viewer: Any, *, anchor: str = "") -> dict[str, Any]:
    """Everything the answer partial shows for one query-log row.

    ``anchor`` prefixes its element ids when several answers share a page (a conversation's earlier
    turns); the answer shown last keeps ``answer`` and ``source-S#``."""
    entries = source_entries(row.citations, viewer)
    badge_class, badge_label = row_badge(row)
    outcome = _withheld(row)
    lead, passages = found_passages(row, viewer) if outcome is not None else (row.answer, [])
    if outcome is not None and outcome.replaces_text and (passages or passages_marker(row.answer) is None):
        lead = ""  # said in the page's own words; a "Passages found" that could not be read stays as text
    # A source without a link is one the viewer cannot read now. Only the asker could read it when
    # the question was asked; an auditor looking at someone else's answer perhaps never could.
    unreadable = _("no longer readable") if row.user_id == getattr(viewer, "pk", None) else _("not readable by you")
    shown = row.status == QueryLog.Status.OK and row.answer_class in (
        QueryLog.AnswerClass.NORMAL,
        QueryLog.AnswerClass.LOW_CONFIDENCE,
    )
    hint = outcome is not None and outcome.upload_hint
    return {
        "row": row,
        "conflicts": conflict_boxes(row.conflicts or [], viewer),
        "sources": entries,
        # Who may add the missing document: the viewer (an upload link) or, failing that, whom to ask.
        "may_upload": hint and uploadable_collections(viewer).exists(),
        "upload_contacts": contacts_for(viewer) if hint else [],
        "badge_class": badge_class,
        "badge_label": badge_label,
        "unreadable_label": unreadable,
        "outcome": outcome,
        "passages_found": passages,
        "shown": shown,
        "answer_html": answer_html(lead, {e.label for e in entries}, anchor),
        "anchor": anchor,
        "answer_id": f"{anchor}answer",
        # The badge, the refusal's explanation and its hint speak the question's language (answers/language.py).
        "answer_language": question_language(row.message or row.question),
        "feedback": list(row.feedback.select_related("user").order_by("-created_at", "-pk")),
    }


def contacts_for(viewer: Any) -> list[str]:
    """Whom ``viewer`` asks for access or for a missing document: the administrators other than themselves."""
    return [n for n in access_contacts() if n != viewer.get_username()]


def access_context(viewer: Any) -> dict[str, Any]:
    """What the ask page says before a question: the collections the viewer reads, and whom to ask for more."""
    names = list(readable_collections(viewer).order_by("name").values_list("name", flat=True))
    return {
        "readable_names": names,
        "reads_everything": bool(getattr(viewer, "is_superuser", False)),
        "access_contacts": contacts_for(viewer),
    }


ALLOWED_TAGS = TEXT_TAGS | {"a", "div", "span"}


_FOOTNOTE_DEF = re.compile(r"^\[\^(\d+)\]: (.+)$", re.MULTILINE)
# What ``footnotes.footnote_text`` writes: ``manual.md §Wiring, p. 3, lines 40-52`` (section and page optional),
# one line ``manual.md, line 52`` (before: ``lines 52-52``); across a page break ``manual.md, p. 1, line 26 – p. 2,
# line 4`` (before: ``pp. 1–2, lines 26–4``); in other kinds' terms (``sources.models.place_text``) a slide for the
# page, a sheet before the rows: ``deck.pptx §Agenda, slide 3, lines 2-4``, ``pumps.xlsx, sheet Pumps, row 23``,
# ``report.docx §Safety, paragraphs 12-15``.
_UNITS = "|".join(sorted({"lines", *LINE_UNITS.values()}))
_UNIT = "|".join(sorted({"line", *(u.removesuffix("s") for u in LINE_UNITS.values())}))
_PAGE = r"(?:pp?\.|slides?)"
_FOOTNOTE_PLACE = re.compile(
    rf"^(?P<source>.+?)(?: §.*?|, sheet .*?)?(?:, {_PAGE} (?P<page>\d+)\S*)?, "
    rf"(?:(?:{_UNITS}) (?P<start>\d+)[-–](?P<end>\d+)|(?:{_UNIT}) (?P<one>\d+)"
    rf"|(?:{_UNIT}) (?P<first>\d+) – {_PAGE} \d+, (?:{_UNIT}) (?P<last>\d+))$"
)


def _listed_chunk(listed: str, chunks: list[Chunk]) -> Chunk | None:
    """The chunk a refusal lists as ``listed`` (``name, location``; before locations named the section and the
    kind, ``name, p. 2, lines 4-15``, one line too, ``lines 4-4``; before each end of a page break named its page,
    ``…, pp. 1–2, lines 26–4``),
    a source by the name it has now before one by its former name (``_names``)."""
    named = []
    for chunk in chunks:
        page = f", p. {chunk.page_start}" if chunk.page_start else ""
        places = [f", {chunk.location}", f"{page}, lines {chunk.line_start}-{chunk.line_end}"]
        if chunk.page_end and chunk.page_end != chunk.page_start:
            pages = "slides" if chunk.kind == Source.Kind.PPTX else "pp."
            crossing = f"{pages} {chunk.page_start}–{chunk.page_end}, lines {chunk.line_start}–{chunk.line_end}"
            places.append(f", {chunk.location.replace(chunk.place, crossing)}")
        for place in places:
            cited = listed.removesuffix(place)
            if cited != listed and _names(cited, chunk.source.name, chunk.source.path):
                named.append((cited != chunk.source.name, chunk))
    return min(named, key=lambda n: n[0])[1] if named else None


def _names(cited: str, name: str, path: str) -> bool:
    """Whether ``cited`` (a file name in a refusal or a footnote) is the source named ``name`` at ``path``, now or
    before another folder of its collection had the path (a file is named with its folder only while one does)."""
    return cited in (name, path) or cited.endswith(f"/{path}")


def footnote_links(document: str, chunk_ids: list[int], viewer: Any) -> dict[str, str]:
    """Each footnote of a generated document (by number) → the source viewer at the chunk it cites.

    The chunk is the one among the run's retrieved chunks (``chunk_ids``) of the named source whose
    lines hold the footnote's lines (the extractive writer cites a unit's own lines inside its chunk),
    the narrowest if several do, a source by the name it has now before one by its former name (``_names``). A
    footnote whose chunk ``viewer`` cannot read (now) gets no link.
    """
    rows = list(
        readable_chunks(viewer)
        .filter(pk__in=chunk_ids)
        .values_list("pk", "source_id", "source__name", "page_start", "line_start", "line_end", "source__path")
    )
    links: dict[str, str] = {}
    for number, text in _FOOTNOTE_DEF.findall(document):
        place = _FOOTNOTE_PLACE.match(text.replace("&lt;", "<").strip())
        if place is None:
            continue
        start = int(place["start"] or place["one"] or place["first"])
        end = int(place["end"] or place["one"] or place["last"])
        page = place["page"]
        holding = [
            r
            for r in rows
            if _names(place["source"], r[2], r[6])
            and (page is None or r[3] == int(page))
            and ((r[4], r[5]) == (start, end) or r[4] <= start <= end <= r[5])
        ]
        if holding:
            pk, source_id = min(holding, key=lambda r: (r[2] != place["source"], r[5] - r[4], r[0]))[:2]
            across = place["first"] is not None or start > end  # a page break: no line numbers to mark
            links[number] = viewer_url(source_id, pk, None if across else [start, end])
    return links


def document_html(text: str, links: dict[str, str] | None = None) -> SafeString:
    """Markdown (with footnotes and tables) → HTML that nh3 has reduced to harmless tags.

    ``links`` (``footnote_links``): footnote number → URL; that footnote's text links there. No
    other link survives but the document's own footnote anchors, whatever the text holds.
    """
    links = links or {}
    allowed = set(links.values())

    def linked(match: re.Match) -> str:
        number, note = match.group(1), match.group(2)
        if number not in links:
            return match.group(0)
        label = note.replace("\\", "\\\\").replace("[", "\\[").replace("]", "\\]")
        return f"[^{number}]: [{label}]({links[number]})"

    def keep(tag: str, attribute: str, value: str) -> str | None:
        # Footnote anchors need their ids; any other id could clobber the page's own elements.
        if attribute == "id":
            return value if _FOOTNOTE_ID.match(value) else None
        if attribute == "href" and not (value.startswith("#fn") or value in allowed):
            return None  # a generated document links nowhere but its footnotes and their sources
        return value

    raw = markdown.markdown(_FOOTNOTE_DEF.sub(linked, text), extensions=["footnotes", "tables", "sane_lists"])
    clean = nh3.clean(
        raw,
        tags=ALLOWED_TAGS,
        attributes={"*": {"id", "class"}, "a": {"href", "title"}},
        attribute_filter=keep,
        link_rel=None,
        url_schemes={"http", "https"},
    )
    return mark_safe(clean)  # noqa: S308 (sanitised by nh3)
