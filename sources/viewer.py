"""What the source viewer shows of a cited passage on its original page: a PDF's page (pdf.js, in the browser),
or an OCR'd image with the quote's words boxed."""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

from django.core.cache import cache
from django.urls import reverse

from sources.models import Chunk
from sources.services.extract.blocks import ExtractionError
from sources.services.extract.ocr import WordBox, image_open, ocr_check, ocr_page

# Kinds whose original file the viewer shows as the page itself, with the content type it is served as.
ORIGINAL_TYPES = {"pdf": "application/pdf"}
# Images a browser shows as they are; any other (TIFF) is served as a PNG of the page.
IMAGE_TYPES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg"}


def viewer_url(source_id: int, chunk_id: int, lines: list[int] | None = None) -> str:
    """The source viewer at a chunk, with a citation's ``lines`` ([first, last]) highlighted."""
    cited = f"&lines={lines[0]}-{lines[1]}" if lines and len(lines) == 2 else ""
    return f"{reverse('sources:detail', args=[source_id])}?chunk={chunk_id}{cited}#chunk-{chunk_id}"


@dataclass(frozen=True)
class OriginalQuote:
    """The page the viewer opens at, the pages the quote may stand on, and the quote, line by line, for the
    browser to find in those pages' text layers."""

    page: int
    first_page: int
    last_page: int
    lines: list[str]

    def as_json(self) -> dict:
        return {"page": self.page, "pages": [self.first_page, self.last_page], "lines": self.lines}


def original_quote(chunk: Chunk, cited: list[tuple[int | None, str, bool]]) -> OriginalQuote:
    """``chunk``'s quote on its pages: the ``cited`` lines marked (``views._cited_lines``), else the whole chunk.

    The lines are kept apart because extraction joins, drops or reorders some (page furniture, columns): the
    browser marks each line it finds, and says which it could not."""
    marked = [text for _, text, is_cited in cited if is_cited]
    lines = [line.strip() for line in (marked or chunk.text.split("\n")) if line.strip()]
    first = chunk.page_start or 1
    return OriginalQuote(page=first, first_page=first, last_page=chunk.page_end or first, lines=lines)


@dataclass(frozen=True)
class Box:
    """A quoted word's box on the image, in percent of its width and height (the image scales with the page)."""

    text: str
    left: float
    top: float
    width: float
    height: float


@dataclass(frozen=True)
class OcrMarks:
    """An OCR'd image with the quote's words boxed; ``problem`` says why none could be, when none could."""

    page: int
    width: int
    height: int
    boxes: list[Box]
    found: int  # quoted lines found as read again
    wanted: int
    problem: str = ""
    shown: bool = True  # False when the file is gone: there is no image to show


def ocr_marks(path: Path, chunk: Chunk, cited: list[tuple[int | None, str, bool]]) -> OcrMarks:
    """The words of ``chunk``'s quote (its ``cited`` lines, else all of it) boxed where tesseract reads them.

    The image is read again with the settings ingest used, so its lines number as the chunk's do; a line whose
    words read differently now (another tesseract) is not boxed, and the counts say so. Cached per file and page."""
    page = chunk.page_start or 1
    wanted = [(n, text) for n, text, is_cited in cited if is_cited and n is not None] or chunk.numbered_lines()
    wanted = [(n, text) for n, text in wanted if text.strip()]
    try:
        read = _read_boxes(path, chunk.source.sha256, page)
    except ExtractionError as exc:
        return OcrMarks(page, 0, 0, [], 0, len(wanted), problem=str(exc))
    width, height, lines = read
    boxes, found = [], 0
    for n, text in wanted:
        words = lines[n - 1] if 0 < n <= len(lines) else []
        if " ".join(w.text for w in words) != " ".join(text.split()):
            continue
        found += 1
        boxes += [
            Box(w.text, 100 * w.left / width, 100 * w.top / height, 100 * w.width / width, 100 * w.height / height)
            for w in words
        ]
    return OcrMarks(page, width, height, boxes, found, len(wanted))


def _read_boxes(path: Path, sha256: str, page: int) -> tuple[int, int, list[list[WordBox]]]:
    key = f"ocr-boxes:{sha256}:{page}"
    cached = cache.get(key)
    if cached is None:
        ocr_check()
        image = image_open(path.read_bytes(), what="the image")
        image.seek(page - 1)
        read = ocr_page(image.copy(), what=f"page {page}")
        cached = (image.size[0], image.size[1], read.boxes)
        cache.set(key, cached, timeout=None)  # keyed by the file's hash: a new version is a new key
    return cached


def image_png(path: Path, page: int) -> bytes:
    """Page ``page`` of an image file as PNG, for a browser that cannot show the original (TIFF)."""
    image = image_open(path.read_bytes(), what="the image")
    image.seek(min(page, getattr(image, "n_frames", 1)) - 1)
    out = io.BytesIO()
    image.convert("RGB" if image.mode not in ("L", "RGB") else image.mode).save(out, "PNG")
    return out.getvalue()
