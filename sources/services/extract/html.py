"""HTML (.html, .htm) with lxml: the main content's text under its heading path, and its tables.

Main content is ``<main>`` (or ``role="main"``), else the only ``<article>``, else ``<body>``;
navigation, scripts, styles, forms, frames and embedded objects are dropped, and so are
the page's own ``<header>``/``<footer>`` when the whole body is read. Nothing is fetched:
links, images, frames and data URIs are never followed, and the parser is told not to
touch the network. A definition list's ``<dd>`` reads after its term, "term: definition", a unit that names
what it defines. Location: the heading path, and lines of the HTML file (the line each
block's element starts on through the last line its text reaches).
"""

from __future__ import annotations

import re
from datetime import datetime

from lxml import etree, html as lxml_html

from sources.services.extract.blocks import MAX_HEADING_CHARS, Block, Extracted, ExtractionError, stated_date
from sources.services.extract.tables import table_blocks

DROP = {
    "script",
    "style",
    "noscript",
    "template",
    "iframe",
    "frame",
    "frameset",
    "object",
    "embed",
    "applet",
    "svg",
    "math",
    "canvas",
    "nav",
    "aside",
    "form",
    "button",
    "select",
    "textarea",
    "input",
    "head",
    "audio",
    "video",
    "picture",
    "img",
    "map",
    "dialog",
    "menu",
}
PAGE_CHROME = {"header", "footer"}
HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
BLOCKS = {
    "p",
    "div",
    "section",
    "article",
    "main",
    "li",
    "ul",
    "ol",
    "dl",
    "dt",
    "dd",
    "blockquote",
    "figure",
    "figcaption",
    "address",
    "details",
    "summary",
    "hr",
    "br",
    "caption",
    "body",
    "header",
    "footer",
    "center",
}
MAX_DEPTH = 200
# <meta> names and properties (Dublin Core, Open Graph, the HTTP header) that date a page, the last revision first.
DATE_META = (
    "dcterms.modified",
    "article:modified_time",
    "last-modified",
    "date",
    "dcterms.date",
    "dc.date",
    "dcterms.issued",
    "dcterms.created",
    "article:published_time",
)
_SPACE = re.compile(r"\s+")
_XML_DECLARATION = re.compile(r"^\s*<\?xml[^>]*\?>")


_CONTROL = re.compile(r"[\x01-\x08\x0b\x0c\x0e-\x1f]")


def extract_html(data: bytes, *, fallback_title: str) -> Extracted:
    """Blocks of the page's main content; tables as one block per row led by the header row."""
    if b"\x00" in data[:8192] and not data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise ExtractionError("binary content (NUL bytes) in an HTML file")
    parser = lxml_html.HTMLParser(remove_comments=True, remove_pis=True, no_network=True, huge_tree=False)
    try:
        root = lxml_html.document_fromstring(_text(data), parser=parser)
    except (etree.ParserError, etree.XMLSyntaxError, ValueError) as exc:
        raise ExtractionError(f"HTML cannot be parsed: {exc}") from None
    title = " ".join((root.findtext(".//title") or "").split())
    issued = _issued(root)
    # Dropped before anything reads text: a cell's or heading's text_content() must not include a script.
    try:
        for element in list(root.iter(*DROP)):
            if element.getparent() is not None:
                # lxml-stubs types iter() as yielding _Element; the HTML parser makes every element an HtmlElement.
                element.drop_tree()  # type: ignore[attr-defined]
    except ValueError as exc:  # control characters in a page that is not UTF-8 (see _text)
        raise ExtractionError(f"HTML cannot be read: {exc}") from None
    main = _main(root)
    walker = _Walker(chrome=main.tag == "body")
    walker.walk(main, depth=0)
    walker.flush()
    if not walker.blocks:
        raise ExtractionError("HTML page has no text in its main content (scripts, styles and navigation are not read)")
    return Extracted(title=title or walker.first_h1 or fallback_title, blocks=walker.blocks, issued=issued)


def _issued(root: lxml_html.HtmlElement) -> datetime | None:
    """The page's date from its ``<meta>`` tags (ISO 8601 values; ``DATE_META`` says which tag wins)."""
    found: dict[str, datetime] = {}
    for meta in root.iter("meta"):
        key = (meta.get("name") or meta.get("property") or meta.get("http-equiv") or "").strip().lower()
        if key in DATE_META and key not in found:
            try:
                found[key] = datetime.fromisoformat((meta.get("content") or "").strip())
            except ValueError:
                continue
    return stated_date(*(found[key] for key in DATE_META if key in found))


def _text(data: bytes) -> str | bytes:
    """The page as text when it is UTF-8 (with or without a BOM), else its bytes for the parser to decode.

    Given bytes without a ``<meta charset>``, libxml2 assumes Latin-1, and a UTF-8 page without one
    (most hand-written and exported pages) came out as mojibake (``12â\x80\x9324 V``). A page that is
    not valid UTF-8 keeps the parser's detection (meta charset, BOM, else Latin-1).
    """
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return data
    # lxml refuses a str that still declares its encoding (<?xml version="1.0" encoding="…"?>). Its parser keeps
    # C0 control characters (not allowed in HTML), but its text setter refuses them, so dropping a script next to
    # one raised ValueError: they go here.
    return _CONTROL.sub("", _XML_DECLARATION.sub("", text, count=1))


def _main(root: lxml_html.HtmlElement) -> lxml_html.HtmlElement:
    for query in ("//main", "//*[@role='main']"):
        found = root.xpath(query)
        if found:
            return found[0]
    articles = root.xpath("//article")
    if len(articles) == 1:
        return articles[0]
    body = root.find("body")
    return body if body is not None else root


def _list_marker(item: lxml_html.HtmlElement) -> str:
    """What a browser draws before ``item``: "- " for an item of a ``<ul>`` (or of no list), else its number as the
    ``<ol>`` gives it ("3. "), counted as HTML counts: from the list's ``start`` (a ``reversed`` list down from its
    number of items), set anew by an item's ``value``; ``type="a"`` / ``"A"`` letters, ``"i"`` / ``"I"`` roman
    numerals. A procedure's steps keep the numbers the reader of the page sees."""
    parent = item.getparent()
    if parent is None or parent.tag != "ol":
        return "- "
    items = [child for child in parent if child.tag == "li"]
    down = parent.get("reversed") is not None
    number = _integer(parent.get("start"), len(items) if down else 1)
    for sibling in items:
        number = _integer(sibling.get("value"), number)
        if sibling is item:
            break
        number += -1 if down else 1
    kind = item.get("type") or parent.get("type") or "1"
    return f"{_numeral(number, kind)}. "


def _integer(value: str | None, default: int) -> int:
    try:
        return int((value or "").strip())
    except ValueError:
        return default


def _numeral(number: int, kind: str) -> str:
    if kind in "aA" and number > 0:
        letters = ""
        while number > 0:
            number, rest = divmod(number - 1, 26)
            letters = chr(ord("a") + rest) + letters
        return letters.upper() if kind == "A" else letters
    if kind in "iI" and 0 < number < 4000:
        roman = ""
        for value, digits in ROMAN:
            count, number = divmod(number, value)
            roman += digits * count
        return roman.lower() if kind == "i" else roman
    return str(number)


ROMAN = (
    (1000, "M"),
    (900, "CM"),
    (500, "D"),
    (400, "CD"),
    (100, "C"),
    (90, "XC"),
    (50, "L"),
    (40, "XL"),
    (10, "X"),
    (9, "IX"),
    (5, "V"),
    (4, "IV"),
    (1, "I"),
)


class _Walker:
    """Collects inline text into paragraphs, flushed at block boundaries, under the current heading path."""

    def __init__(self, *, chrome: bool) -> None:
        self.chrome = chrome  # reading the whole body: drop its page header and footer
        self.blocks: list[Block] = []
        self.path: list[tuple[int, str]] = []
        self.first_h1 = ""
        self.buf: list[str] = []
        self.start = self.end = 1
        self.tables = 0
        self.term, self.term_line, self.term_done = "", 1, False  # the <dt> (or <dt>s) the next <dd> defines
        self.marker = ""  # the open <li>'s bullet or number, until its first text

    def walk(self, el: lxml_html.HtmlElement, *, depth: int) -> None:
        tag = el.tag if isinstance(el.tag, str) else ""
        if not tag or tag in DROP or (self.chrome and tag in PAGE_CHROME and depth <= 2):
            return
        if depth > MAX_DEPTH:
            raise ExtractionError(f"HTML nested deeper than {MAX_DEPTH} elements")
        line = el.sourceline or self.end
        if tag in HEADINGS:
            self._heading(HEADINGS[tag], " ".join(el.text_content().split()))
        elif tag == "table":
            self._table(el)
        elif tag == "dt":
            self._term(" ".join(el.text_content().split()), line)
        elif tag == "pre":
            self.flush()
            self._add(el.text_content(), line, keep_lines=True)
            self.flush()
        else:
            block = tag in BLOCKS
            if block:
                self.flush()
            if tag == "dd" and self.term:  # the definition reads with its term: "varchar: Almost always …"
                self._add(self.term + ": ", self.term_line)
                self.term_done = True
            if tag == "li":
                self.marker = _list_marker(el)  # goes in front of the item's first text, in a <p> of it or not
            self._add(el.text or "", line)
            for child in el:
                self.walk(child, depth=depth + 1)
                self._add(child.tail or "", child.sourceline or line)
            if tag == "li":
                self.marker = ""  # an item without text leaves its number to no one
            if block:
                self.flush()
            if tag == "dl":
                self._term_end()

    def _term(self, term: str, line: int) -> None:
        """A ``<dt>``: kept for the ``<dd>``s after it; terms in a row (``<dt>`` over ``<dt>``) share them."""
        self.flush()
        if self.term_done or not self.term:
            self.term, self.term_line = term, line
        elif term:
            self.term = f"{self.term}, {term}"
        self.term_done = False

    def _term_end(self) -> None:
        """The end of a ``<dl>``: a term no ``<dd>`` defined is kept as text of its own."""
        if self.term and not self.term_done:
            heading = tuple(name for _, name in self.path)
            self.blocks.append(Block(self.term, heading, None, self.term_line, self.term_line))
        self.term, self.term_done = "", False

    def _add(self, text: str, line: int, *, keep_lines: bool = False) -> None:
        if not text.strip() and not self.buf:
            return
        if not self.buf:
            self.start = self.end = line
            text = text.lstrip("\n") if keep_lines else text  # <pre> ignores a newline right after its tag
            if self.marker:
                text, self.marker = self.marker + text.lstrip(), ""
        self.buf.append(text if keep_lines else _SPACE.sub(" ", text))
        self.end = max(self.end, line + text.rstrip().count("\n"))

    def flush(self) -> None:
        text = "".join(self.buf).strip()
        if "\n" not in text:
            text = _SPACE.sub(" ", text)
        if text:
            heading = tuple(name for _, name in self.path)
            self.blocks.append(Block(text, heading, None, self.start, max(self.start, self.end)))
        self.buf = []

    def _heading(self, level: int, name: str) -> None:
        self.flush()
        if not name or len(name) > MAX_HEADING_CHARS:
            return
        self.path = [(lvl, h) for lvl, h in self.path if lvl < level] + [(level, name)]
        if level == 1 and not self.first_h1:
            self.first_h1 = name

    def _table(self, table: lxml_html.HtmlElement) -> None:
        self.flush()
        self.tables += 1
        rows: list[list[str]] = []
        lines: list[int] = []
        for tr in table.iter("tr"):
            if next(tr.iterancestors("table"), None) is not table:
                continue  # a nested table's rows are read as the text of the outer cell
            rows.append([" ".join(cell.text_content().split()) for cell in tr if cell.tag in ("td", "th")])
            lines.append(tr.sourceline or table.sourceline or 1)
        heading = tuple(name for _, name in self.path)
        self.blocks += table_blocks(
            rows, heading=heading, first_line=table.sourceline or 1, unit=-self.tables, lines=lines
        )
        if lines:
            self.end = max(self.end, lines[-1])
