"""Markdown from sources and models, turned into HTML that can never run script.

Two walls: Python-Markdown with raw HTML switched off (a ``<script>`` or ``<img onerror>``
in the text is shown as text, escaped, never passed through as markup), then nh3's
allow-list of tags, attributes and URL schemes over whatever Markdown produced. The
Content-Security-Policy is the third.
"""

from __future__ import annotations

import markdown
import nh3
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
