"""OCR with Tesseract (Debian's ``tesseract-ocr`` + ``tesseract-ocr-eng``) through pytesseract.

Used for image sources (.png, .jpg, .jpeg, .tif, .tiff) and for PDF pages that hold a
scanned image but no text layer. OCR is optional at run time: without the tesseract
program such a file fails with a reason naming the packages (``make ocr`` installs them).
Every page is bounded: an image over MAX_PIXELS is refused from its header before it is
decoded, and tesseract is stopped after PAGE_TIMEOUT seconds. Nothing is downloaded:
the English model comes with the Debian package.
"""

from __future__ import annotations

import io
import logging
import shutil
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sources.services.extract.blocks import Block, Extracted, ExtractionError, paragraphs

if TYPE_CHECKING:
    from PIL import Image

logger = logging.getLogger(__name__)

PACKAGES = "tesseract-ocr and tesseract-ocr-eng"
INSTALL_HINT = f"install Debian's {PACKAGES} (make ocr)"
MAX_PIXELS = 60_000_000  # an A4 page at 600 dpi is 35 million pixels
MAX_FRAMES = 500
PAGE_TIMEOUT = 120  # seconds of tesseract per page
LANG = "eng"


@dataclass(frozen=True)
class WordBox:
    """A word tesseract read and where: its box in the image's pixels."""

    text: str
    left: int
    top: int
    width: int
    height: int


@dataclass(frozen=True)
class OcrPage:
    lines: list[str]  # the page's text, line by line (blank lines between paragraphs)
    confidence: float  # mean word confidence, 0-100
    boxes: list[list[WordBox]] = field(default_factory=list)  # each line's words with their boxes ([] for a blank)


def ocr_check() -> None:
    """Raise ExtractionError naming the packages when OCR cannot run here."""
    if shutil.which("tesseract") is None:
        raise ExtractionError(f"needs OCR, and the tesseract program is not installed: {INSTALL_HINT}")
    try:
        import pytesseract
    except ImportError:
        raise ExtractionError(
            "needs OCR, and the pytesseract package is not installed (pip install -r requirements/base.txt)"
        ) from None
    try:
        languages = pytesseract.get_languages(config="")
    except Exception as exc:  # pytesseract raises its own error types and OSError; say which
        raise ExtractionError(f"needs OCR, and tesseract does not run: {type(exc).__name__}: {exc}") from None
    if LANG not in languages:
        raise ExtractionError(f"needs OCR, and tesseract has no English model: {INSTALL_HINT}")


def image_open(data: bytes, *, what: str) -> Image.Image:
    """A PIL image read from its header only; refused when it is not an image or too large to decode."""
    from PIL import Image, UnidentifiedImageError

    with warnings.catch_warnings():
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        try:
            image = Image.open(io.BytesIO(data))
        except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
            raise ExtractionError(f"{what} is too large to OCR ({exc})") from None
        except UnidentifiedImageError:
            raise ExtractionError(
                f"{what} cannot be read as an image: not a PNG, JPEG or TIFF image, or a damaged one"
            ) from None
        except (OSError, ValueError, SyntaxError) as exc:
            raise ExtractionError(f"damaged {what}: {exc}") from None
    width, height = image.size
    if width * height > MAX_PIXELS:
        raise ExtractionError(
            f"{what} of {width:,} × {height:,} pixels is too large to OCR (more than "
            f"{MAX_PIXELS // 1_000_000} million pixels); scale it down"
        )
    return image


def ocr_page(image: Image.Image, *, what: str) -> OcrPage:
    """The text tesseract reads in ``image``, with its mean word confidence; bounded by PAGE_TIMEOUT."""
    import pytesseract

    try:
        image.load()
        if image.mode not in ("L", "RGB", "1"):
            image = image.convert("RGB")
        data = pytesseract.image_to_data(image, lang=LANG, timeout=PAGE_TIMEOUT, output_type=pytesseract.Output.DICT)
    except RuntimeError as exc:  # pytesseract's timeout
        if "timeout" in str(exc).lower():
            raise ExtractionError(f"OCR of {what} took longer than {PAGE_TIMEOUT} s and was stopped") from None
        raise ExtractionError(f"OCR of {what} failed: {exc}") from None
    except pytesseract.TesseractError as exc:
        raise ExtractionError(f"OCR of {what} failed: {exc.message or exc.status}") from None
    except (OSError, ValueError, SyntaxError) as exc:
        raise ExtractionError(f"damaged image in {what}: {exc}") from None
    return _page_text(data)


def _page_text(data: dict[str, list]) -> OcrPage:
    """Words grouped into lines, paragraphs separated by a blank line; confidence over real words."""
    lines: list[str] = []
    boxes: list[list[WordBox]] = []
    confidences: list[float] = []
    current: tuple[int, int, int] | None = None
    paragraph: tuple[int, int] | None = None
    for i, word in enumerate(data["text"]):
        word = (word or "").strip()
        confidence = float(data["conf"][i])
        if not word or confidence < 0:
            continue
        confidences.append(confidence)
        box = WordBox(word, *(int(data[key][i]) for key in ("left", "top", "width", "height")))
        key = (data["block_num"][i], data["par_num"][i], data["line_num"][i])
        if key != current:
            if paragraph is not None and key[:2] != paragraph:
                lines.append("")
                boxes.append([])
            lines.append(word)
            boxes.append([box])
            current, paragraph = key, key[:2]
        else:
            lines[-1] += " " + word
            boxes[-1].append(box)
    return OcrPage(lines, sum(confidences) / len(confidences) if confidences else 0.0, boxes)


def page_blocks(page: OcrPage, *, number: int | None, heading: tuple[str, ...] = ()) -> list[Block]:
    return [
        Block(text, heading, number, start, end, ocr=round(page.confidence, 1))
        for text, start, end in paragraphs(page.lines, 1)
    ]


def extract_image(data: bytes, *, fallback_title: str) -> Extracted:
    """OCR of every frame of an image file (a multi-page TIFF has one per page); frame N is page N."""
    image = image_open(data, what="image")
    ocr_check()
    frames = getattr(image, "n_frames", 1)
    if frames > MAX_FRAMES:
        raise ExtractionError(f"image with {frames:,} frames (more than {MAX_FRAMES}); split it")
    blocks: list[Block] = []
    for index in range(frames):
        try:
            image.seek(index)
        except (OSError, ValueError, EOFError) as exc:
            raise ExtractionError(f"damaged image: frame {index + 1} cannot be read ({exc})") from None
        width, height = image.size
        if width * height > MAX_PIXELS:
            raise ExtractionError(f"image frame {index + 1} of {width:,} × {height:,} pixels is too large to OCR")
        what = f"page {index + 1}" if frames > 1 else "the image"
        blocks += page_blocks(ocr_page(_frame(image, what=what), what=what), number=index + 1 if frames > 1 else None)
    if not blocks:
        raise ExtractionError("OCR found no text in the image")
    return Extracted(title=fallback_title, blocks=blocks)


def _frame(image: Image.Image, *, what: str) -> Image.Image:
    """A decoded copy of the current frame. Pillow decodes only here, so a truncated or damaged
    image data stream is found here, after its header was read."""
    try:
        return image.copy()
    except (OSError, ValueError, SyntaxError, EOFError) as exc:
        raise ExtractionError(f"damaged {what}: {exc}") from None
