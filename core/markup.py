"""Markdown from sources and models, turned into HTML that can never run script.

Two walls: Python-Markdown with raw HTML switched off (a ``<script>`` or ``<img onerror>``
in the text is shown as text, escaped, never passed through as markup), then nh3's
allow-list of tags, attributes and URL schemes over whatever Markdown produced. The
Content-Security-Policy is the third.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import markdown
import nh3
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

TEXT_TAGS = {
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "p",
    "br",
    "hr",
    "ul",
    "ol",
    "li",
    "strong",
    "em",
    "code",
    "pre",
    "blockquote",
    "table",
    "thead",
    "tbody",
    "tr",
    "th",
    "td",
    "sup",
    "sub",
    "del",
}
LINK_REL = "nofollow noopener noreferrer"


def _convert(text: str, *, extensions: list[str]) -> str:
    md = markdown.Markdown(extensions=extensions)
    # Raw HTML is text here, not markup: without these two, Markdown passes it through as is.
    md.preprocessors.deregister("html_block")
    md.inlinePatterns.deregister("html")
    return md.convert(text)


def _web_links_only(tag: str, attribute: str, value: str) -> str | None:
    if tag == "a" and attribute == "href":
        return value if value.lower().startswith(("http://", "https://")) else None
    return value


def markdown_html(text: str, *, links: bool = False, line_breaks: bool = False) -> SafeString:
    """``text`` as Markdown (tables, lists, code, emphasis) in safe HTML.

    Raw HTML in ``text`` is shown escaped. ``links``: keep links to http(s) pages (opened
    without a referrer); otherwise a link becomes its text. ``line_breaks``: a single
    newline is a line break (answers), not a space.
    """
    extensions = ["tables", "sane_lists", "fenced_code"] + (["nl2br"] if line_breaks else [])
    tags = TEXT_TAGS | ({"a"} if links else set())
    clean = nh3.clean(
        _convert(text, extensions=extensions),
        tags=tags,
        attributes={"a": {"href", "title"}} if links else {},
        attribute_filter=_web_links_only,
        link_rel=LINK_REL if links else None,
        url_schemes={"http", "https"},
    )
    return mark_safe(clean)  # noqa: S308 (raw HTML escaped by Markdown, then sanitised by nh3)


_FENCE = re.compile(r"\s*(```|~~~)")
_HEADING = re.compile(r"(\s*)#{1,6}\s+(.*?)\s*#*\s*$")
_MARKER = re.compile(r"(\s*)([-*+]|\d{1,9}[.)]|>)\s+(.*)$")
_TABLE_RULE = re.compile(r"\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)+\|?\s*$")


def markdown_lines_html(lines: Sequence[str]) -> list[SafeString]:
    """Each line of a Markdown passage as safe inline HTML, one for one, so a viewer can keep numbering lines.

    A line's inline Markdown is rendered (emphasis, code, links) by ``markdown_html``; its block marker is shown
    in its place: a heading in bold, a bullet as •, a table row's cells between bars. Lines inside a fenced code
    block, and anything a single line cannot render inline, stay as the escaped text."""
    shown: list[SafeString] = []
    fenced = False
    for line in lines:
        if _FENCE.match(line):
            fenced = not fenced
        if fenced or _FENCE.match(line) or _TABLE_RULE.match(line):
            shown.append(SafeString(f'<code class="md-raw">{escape(line)}</code>' if line.strip() else ""))
        elif line.lstrip().startswith("|"):
            cells = line.strip().strip("|").split("|")
            bar = '<span class="md-bar">|</span>'
            shown.append(SafeString(bar + bar.join(f" {_inline(cell.strip())} " for cell in cells) + bar))
        elif heading := _HEADING.fullmatch(line):
            shown.append(SafeString(f'{escape(heading[1])}<strong class="md-h">{_inline(heading[2])}</strong>'))
        elif marker := _MARKER.fullmatch(line):
            symbol = "•" if marker[2] in "-*+" else "│" if marker[2] == ">" else escape(marker[2])
            shown.append(SafeString(f"{escape(marker[1])}{symbol} {_inline(marker[3])}"))
        else:
            indent = line[: len(line) - len(line.lstrip())]
            shown.append(SafeString(escape(indent) + _inline(line.strip())))
    return shown


def _inline(text: str) -> str:
    """``text`` rendered as one paragraph's inline HTML, without the paragraph; escaped text when it is not one."""
    if not text:
        return ""
    html = str(markdown_html(text, links=True)).strip()
    inner = html.removeprefix("<p>").removesuffix("</p>")
    return inner if html.startswith("<p>") and html.endswith("</p>") and "<p>" not in inner else escape(text)


# Elements whose content is code or styling, never words of a question: dropped with what they hold.
_CODE_ELEMENTS = r"script|style|template|noscript|iframe|object|textarea|svg|math"
_CODE_BLOCK = re.compile(rf"<({_CODE_ELEMENTS})\b[^>]*>.*?(?:</\1\s*>|$)", re.IGNORECASE | re.DOTALL)
_COMMENT = re.compile(r"<!--.*?(?:-->|$)", re.DOTALL)
_TAG = re.compile(r"</?([a-zA-Z][a-zA-Z0-9-]*)((?:\s[^<>]*)?)(/?)>")


def markup_strip(text: str) -> str:
    """``text`` with HTML markup taken out and its words kept: a question pasted from a web page or
    carrying a ``<script>`` is asked as if typed plainly.

    Dropped with their content: comments and code elements (``script``, ``style``, ``iframe`` …).
    A tag is dropped (its text kept) when it is markup beyond doubt: it is closed (``<b>…</b>``),
    closes itself (``<br/>``), or carries attributes with values (``<img src=x>``). A bare ``<name>`` with none
    of these is kept, since technical questions write placeholders that way (``set ip <address>``).
    """
    text = _COMMENT.sub(" ", _CODE_BLOCK.sub(" ", text))
    closed = {m.group(1).lower() for m in _TAG.finditer(text) if m.group(0).startswith("</")}

    def markup(match: re.Match[str]) -> str:
        name, attributes = match.group(1).lower(), match.group(2).strip()
        self_closing = match.group(3) or attributes.endswith("/")
        is_markup = match.group(0).startswith("</") or name in closed or "=" in attributes or self_closing
        return " " if is_markup else match.group(0)

    return _TAG.sub(markup, text)
