"""PDF furniture found by where it stands and what it repeats; sections starting where the outline points."""

from __future__ import annotations

from pathlib import Path

from sources.services.extract import extract
from tests.conftest import make_pdf


def _chapters(page: int) -> str:
    """A running header naming the chapter and the page: chapter 1 on pages 1-2, 2 on page 3, 3 on pages 4-9."""
    chapter = 1 if page <= 2 else 2 if page == 3 else 3
    title = {1: "Getting started", 2: "Arrays and matrices", 3: "Graphical procedures"}[chapter]
    return f"Chapter {chapter}: {title} {page + 6}"


TOPICS = "power wiring mounting network alarms buffer firmware disposal storage".split()


def test_running_header_naming_a_short_chapter_and_its_page_is_left_out(tmp_path: Path) -> None:
    """Chapter 1's header stands on two pages, chapter 2's on one: each is like chapter 3's, which repeats. The
    chapter's last page says little more than its header and number, and loses them too."""
    pages = [(f"About {t}", f"The {t} comes first.\nThen {t} again.\nLast on {t}.") for t in TOPICS]
    pages.append(("Closing remarks", "Done."))
    pdf = make_pdf(tmp_path / "c.pdf", pages, header_line=_chapters, footer_line="{page}")
    blocks = extract(pdf, pdf.read_bytes()).blocks
    assert [b.text for b in blocks] == [f"{heading}\n{text}" for heading, text in pages]
    assert [(b.page, b.line_start) for b in blocks] == [(n, 2) for n in range(1, len(pages) + 1)]  # numbers kept


def test_a_lone_number_is_left_out_only_where_it_counts_the_pages(tmp_path: Path) -> None:
    pages = [(f"About {t}", f"The {t} comes first.\nThen {t} again.\nLast on {t}.") for t in TOPICS[:5]]
    numbered = make_pdf(tmp_path / "n.pdf", pages, footer_line="{page}")
    assert all(not b.text.endswith(str(b.page)) for b in extract(numbered, numbered.read_bytes()).blocks)
    valued = make_pdf(tmp_path / "v.pdf", pages, footer_line="42")  # the same value on every page: no page number
    assert all(b.text.endswith("42") for b in extract(valued, valued.read_bytes()).blocks)


def test_lines_alike_in_the_body_of_many_pages_are_kept(tmp_path: Path) -> None:
    """Body lines sharing first and last words at one height on every page ("Then power again.") are no furniture
    unless one of them repeats whole there."""
    pages = [(f"About {t}", f"The {t} comes first.\nThen {t} again.\nLast on {t}.") for t in TOPICS]
    pdf = make_pdf(tmp_path / "b.pdf", pages)
    assert [b.text for b in extract(pdf, pdf.read_bytes()).blocks] == [f"{h}\n{t}" for h, t in pages]


def _sections_pdf(path: Path, *, outline_at_top: bool = False) -> Path:
    """Two pages: section "Power" runs from page 1 onto page 2, where "2.1 Wiring" starts halfway down; its outline
    entry is "Wiring" (no number), pointing at the heading or (``outline_at_top``) at the page's top."""
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("Helvetica", size=11)
    pdf.add_page()
    pdf.start_section("Power", level=0)
    pdf.multi_cell(0, 6, "1 Power", new_x="LMARGIN", new_y="NEXT")
    supply = "\n".join(f"The supply line {n} is protected." for n in range(1, 30))
    pdf.multi_cell(0, 6, supply, new_x="LMARGIN", new_y="NEXT")
    pdf.add_page()
    pdf.multi_cell(0, 6, "The input takes 24 V.\nIt draws 2 W at most.", new_x="LMARGIN", new_y="NEXT")
    pdf.ln(6)
    if outline_at_top:
        y = pdf.get_y()
        pdf.set_y(10)
        pdf.start_section("Wiring", level=0)
        pdf.set_y(y)
    else:
        pdf.start_section("Wiring", level=0)
    pdf.multi_cell(0, 6, "2.1 Wiring", new_x="LMARGIN", new_y="NEXT")
    pdf.multi_cell(0, 6, "Use shielded cable.\nGround the shield at one end.", new_x="LMARGIN", new_y="NEXT")
    pdf.output(str(path))
    return path


def test_a_section_starts_where_its_outline_entry_points_on_the_page(tmp_path: Path) -> None:
    for outline_at_top in (False, True):  # a destination above its heading: the heading's line is where it starts
        pdf = _sections_pdf(tmp_path / f"s{outline_at_top}.pdf", outline_at_top=outline_at_top)
        page2 = [(b.heading, b.text) for b in extract(pdf, pdf.read_bytes()).blocks if b.page == 2]
        assert page2 == [
            (("Power",), "The input takes 24 V.\nIt draws 2 W at most."),
            (("Wiring",), "2.1 Wiring\nUse shielded cable.\nGround the shield at one end."),
        ], outline_at_top


def test_a_section_whose_title_is_not_in_the_text_starts_at_its_outline_height(tmp_path: Path) -> None:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("Helvetica", size=11)
    pdf.add_page()
    pdf.start_section("Overview", level=0)
    pdf.multi_cell(0, 6, "The gateway collects data.\nIt sends them on.", new_x="LMARGIN", new_y="NEXT")
    pdf.ln(6)
    pdf.start_section("Limits of operation", level=0)  # its heading is drawn as an image, say: no text line
    pdf.multi_cell(0, 6, "Keep it below 55 C.\nKeep it dry.", new_x="LMARGIN", new_y="NEXT")
    pdf.output(str(tmp_path / "h.pdf"))
    blocks = extract(tmp_path / "h.pdf", (tmp_path / "h.pdf").read_bytes()).blocks
    assert [(b.heading, b.line_start, b.text) for b in blocks] == [
        (("Overview",), 1, "The gateway collects data.\nIt sends them on."),
        (("Limits of operation",), 3, "Keep it below 55 C.\nKeep it dry."),
    ]
