"""OCR of scanned PDF pages and image sources, with Debian's tesseract (``make ocr``).

Pages are rendered here with PIL from known text, so the accuracy check has an answer key.
The tests that need tesseract are skipped, with the command that installs it, on a machine
without it; ``make test`` installs it first. The behaviour without tesseract is tested
everywhere by hiding the program.
"""

from __future__ import annotations

import difflib
import io
import shutil
from pathlib import Path

import pytest
from PIL import Image, ImageDraw, ImageFont

from sources.models import Chunk, Source
from sources.services.extract import ExtractionError, extract
from sources.services.extract import ocr
from sources.services.ingest_jobs import knowledge_base_ingest
from tests.conftest import make_pdf

needs_tesseract = pytest.mark.skipif(shutil.which("tesseract") is None, reason="tesseract not installed (make ocr)")
FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
LINES = [
    "The pump P7 delivers 40 litres per minute at 3 bar.",
    "Service the relief valve every 500 operating hours.",
    "",
    "Maximum inlet temperature is 60 degrees Celsius.",
]


def scanned_page(lines: list[str] = LINES, *, dpi: int = 200) -> Image.Image:
    """An A4-wide page with 11 pt text at ``dpi``, as a scanner would give it."""
    font = ImageFont.truetype(FONT, int(11 / 72 * dpi)) if Path(FONT).exists() else ImageFont.load_default(30)
    page = Image.new("L", (int(8.27 * dpi), int(4 * dpi)), 255)
    draw = ImageDraw.Draw(page)
    for i, line in enumerate(lines):
        draw.text((dpi, dpi // 2 + i * int(0.25 * dpi)), line, fill=0, font=font)
    return page


def encoded(image: Image.Image, fmt: str) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, fmt, resolution=200.0)
    return buffer.getvalue()


def word_accuracy(expected: str, got: str) -> float:
    want, have = expected.split(), got.split()
    matcher = difflib.SequenceMatcher(a=want, b=have, autojunk=False)
    return sum(block.size for block in matcher.get_matching_blocks()) / len(want)


@needs_tesseract
@pytest.mark.parametrize("fmt,name", [("PNG", "scan.png"), ("JPEG", "scan.jpg"), ("TIFF", "scan.tiff")])
def test_image_sources_are_read_by_ocr_with_confidence(fmt: str, name: str) -> None:
    result = extract(Path(name), encoded(scanned_page(), fmt))
    text = "\n".join(b.text for b in result.blocks)
    assert word_accuracy(" ".join(LINES), text) >= 0.9, text
    assert all(b.ocr is not None and 50 < b.ocr <= 100 for b in result.blocks)
    assert result.title == "scan"


@needs_tesseract
@pytest.mark.django_db
def test_scanned_pdf_pages_are_ocrd_and_text_pages_are_not(kb: Path, tmp_path: Path) -> None:
    text_pdf = make_pdf(tmp_path / "text.pdf", [("1 Intro", "The gateway has four relay outputs.")])
    scan = scanned_page().convert("RGB")
    scan.save(
        kb / "mixed.pdf",
        "PDF",
        resolution=200.0,
        save_all=True,
        append_images=[scanned_page(["Page two holds the wiring table."]).convert("RGB")],
    )
    (kb / "text.pdf").write_bytes(text_pdf.read_bytes())
    report = {f.path: f for f in knowledge_base_ingest(target=kb).files}
    assert report["mixed.pdf"].status == "ingested", report["mixed.pdf"].reason
    chunks = list(Chunk.objects.filter(source__path="mixed.pdf").order_by("ordinal"))
    assert all(c.ocr_confidence and c.ocr_confidence > 50 for c in chunks)
    assert "relief valve" in chunks[0].text and chunks[0].page_start == 1
    last = chunks[-1]
    assert "wiring table" in last.text and last.page_end == 2
    assert last.location.endswith(f"OCR, confidence {last.ocr_confidence:.0f} %")
    assert Chunk.objects.get(source__path="text.pdf").ocr_confidence is None  # a text layer is never OCR'd


@pytest.mark.django_db
def test_without_tesseract_a_scanned_page_fails_naming_the_packages(kb: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ocr.shutil, "which", lambda name: None)
    scanned_page().convert("RGB").save(kb / "scan.pdf", "PDF", resolution=200.0)
    (kb / "photo.png").write_bytes(encoded(scanned_page(), "PNG"))
    (kb / "notes.txt").write_text("Relay outputs switch 230 V.\n")
    report = {f.path: (f.status, f.reason) for f in knowledge_base_ingest(target=kb).files}
    hint = "install Debian's tesseract-ocr and tesseract-ocr-eng (make ocr)"
    assert report["scan.pdf"][0] == "failed" and report["scan.pdf"][1].startswith("PDF page 1 is a scanned image")
    assert hint in report["scan.pdf"][1] and hint in report["photo.png"][1]
    assert report["notes.txt"] == ("ingested", "")


@pytest.mark.django_db
def test_without_tesseract_image_only_pages_of_a_text_pdf_are_left_out_and_reported(
    kb: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A datasheet with a full-page figure stays searchable without OCR; its report names the page and why."""
    from pypdf import PdfReader, PdfWriter

    monkeypatch.setattr(ocr.shutil, "which", lambda name: None)
    text = make_pdf(tmp_path / "text.pdf", [("1 Intro", "The gateway has four relay outputs.")])
    scanned_page().convert("RGB").save(tmp_path / "figure.pdf", "PDF", resolution=200.0)
    writer = PdfWriter()
    for part in (text, tmp_path / "figure.pdf"):
        for page in PdfReader(part).pages:
            writer.add_page(page)
    with (kb / "datasheet.pdf").open("wb") as handle:
        writer.write(handle)
    (result,) = knowledge_base_ingest(target=kb).files
    assert result.status == "ingested"
    assert result.reason == (
        "PDF page(s) 2 hold only images and were not read; reading them needs OCR, and the "
        "tesseract program is not installed: install Debian's tesseract-ocr and "
        "tesseract-ocr-eng (make ocr)"
    )
    assert [c.page_start for c in Chunk.objects.filter(source__path="datasheet.pdf")] == [1]
    assert Source.objects.get(path="datasheet.pdf").reason == result.reason  # shown on the sources page


def test_a_huge_image_is_refused_from_its_header() -> None:
    """20,000 × 20,000 pixels: refused before a byte of it is decoded (no OCR run, no memory spike)."""
    header = Image.new("1", (20_000, 20_000))  # 1-bit: 50 MB in memory here, a few hundred KB as PNG
    data = encoded(header, "PNG")
    del header
    with pytest.raises(ExtractionError, match=r"image is too large to OCR \(Image size \(400000000 pixels\)"):
        extract(Path("huge.png"), data)
    wide = encoded(Image.new("1", (12_000, 6_000)), "PNG")  # under Pillow's own limit, over Foundry's
    with pytest.raises(ExtractionError, match="image of 12,000 × 6,000 pixels is too large to OCR"):
        extract(Path("wide.png"), wide)


def test_a_huge_scanned_pdf_page_is_refused_before_decoding(tmp_path: Path) -> None:
    pdf = tmp_path / "huge.pdf"
    Image.new("1", (20_000, 20_000)).save(pdf, "PDF", resolution=200.0)
    with pytest.raises(ExtractionError, match="PDF page 1 is a scanned image of 20,000 × 20,000 pixels"):
        extract(Path("huge.pdf"), pdf.read_bytes())


@pytest.mark.parametrize(
    "data,reason",
    [
        (b"\x89PNG\r\n\x1a\n" + b"\x00" * 50, "image cannot be read"),
        (b"GIF89a" + b"\x00" * 50, "image cannot be read"),
    ],
)
def test_damaged_images_fail_with_a_reason(data: bytes, reason: str) -> None:
    with pytest.raises(ExtractionError, match=reason):
        extract(Path("bad.png"), data)


@needs_tesseract
@pytest.mark.parametrize("fmt", ["PNG", "JPEG", "TIFF"])
def test_an_image_cut_short_fails_with_a_reason(fmt: str) -> None:
    """Its header reads; its pixel data ends early. Found by the parser fuzzer: Pillow's OSError escaped
    from decoding the frame, and ingest recorded an "unexpected error"."""
    data = encoded(scanned_page(), fmt)
    with pytest.raises(ExtractionError, match="^damaged the image: "):
        extract(Path(f"cut.{fmt.lower()}"), data[: len(data) * 2 // 3])


@needs_tesseract
def test_the_ocr_time_limit_stops_a_page(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ocr, "PAGE_TIMEOUT", 0.001)
    with pytest.raises(ExtractionError, match="OCR of the image took longer than 0.001 s and was stopped"):
        extract(Path("scan.png"), encoded(scanned_page(), "PNG"))
