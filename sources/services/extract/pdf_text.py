"""A PDF's text per page with PDFium (pypdfium2): each line with the height it stands at.

PDFium keeps what the page shows closer than pypdf's plain mode does (``bench/pdf_words.py``: 95.6 % of poppler's
words in order against 88.1 %): spaces between words set by kerning alone ("IhreEntwicklungsumgebung…" in pypdf),
ligatures written out ("fi", never "ﬁ", which no search for "fi" finds), two-column pages read column by column.
Its characters are read one by one, so each line gets the height of its first character's origin (the baseline, in
PDF points from the page's bottom) as ``Line.y``. A word broken at a line's end is kept as printed, "Win-" on one
line and "dows" on the next: PDFium marks the hyphen (U+0002, or U+FFFE) and joins the two lines, which would
number the page's lines otherwise than they stand.

PDFium is not thread-safe: every call into it holds one lock.
"""

from __future__ import annotations

import ctypes
import threading

from sources.services.extract.blocks import ExtractionError
from sources.services.extract.pdf_furniture import Line

_LOCK = threading.Lock()
_LINE_END_HYPHEN = (0x02, 0xFFFE)
_SKIP = (0x0D, 0x00)  # PDFium ends a line with "\r\n"; the "\n" alone is the break


def pdf_page_lines(data: bytes, rotations: list[int]) -> list[list[Line] | None]:
    """The lines of each page (None for a page PDFium cannot read); ``rotations``: each page's /Rotate, from pypdf.

    On a page turned by 90 or 270 degrees the top of the page is a side of its text space: heights are not given.
    """
    import pypdfium2
    import pypdfium2.raw as raw

    with _LOCK:
        try:
            document = pypdfium2.PdfDocument(data, password="")
        except pypdfium2.PdfiumError as exc:
            raise ExtractionError(f"damaged PDF: PDFium cannot open it ({exc})") from None
        try:
            out: list[list[Line] | None] = []
            for index, rotation in enumerate(rotations):
                try:
                    page = document[index]
                    textpage = page.get_textpage()
                except pypdfium2.PdfiumError:
                    out.append(None)
                    continue
                try:
                    out.append(_lines(raw, textpage.raw, upright=_upright(rotation)))
                finally:
                    textpage.close()
                    page.close()
            return out
        finally:
            document.close()


def _upright(rotation: int) -> float | None:
    if rotation % 360 in (90, 270):
        return None
    return -1.0 if rotation % 360 == 180 else 1.0


def _lines(raw: object, textpage: object, *, upright: float | None) -> list[Line]:
    count: int = raw.FPDFText_CountChars(textpage)  # type: ignore[attr-defined]
    x, y = ctypes.c_double(), ctypes.c_double()
    lines: list[Line] = []
    chars: list[str] = []
    height: float | None = None
    hyphen = False  # the last line ended at a marked hyphen: a break PDFium writes right after it is that same break
    for i in range(count):
        code: int = raw.FPDFText_GetUnicode(textpage, i)  # type: ignore[attr-defined]
        if code in _SKIP:
            continue
        if code == 0x0A and hyphen and not "".join(chars).strip():
            chars, hyphen = [], False
            continue
        if code == 0x0A or code in _LINE_END_HYPHEN:
            hyphen = code != 0x0A
            lines.append(Line("".join(chars).rstrip() + ("-" if hyphen else ""), height))
            chars, height = [], None
            continue
        char = chr(code) if code < 0x110000 else "\ufffd"
        if not char.isspace():
            hyphen = False
            if height is None and upright is not None:
                raw.FPDFText_GetCharOrigin(textpage, i, ctypes.byref(x), ctypes.byref(y))  # type: ignore[attr-defined]
                height = y.value * upright
        chars.append(char)
    if chars:
        lines.append(Line("".join(chars).rstrip(), height))
    return lines
