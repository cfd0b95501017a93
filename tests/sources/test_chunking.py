from __future__ import annotations

from sources.services.chunking import chunk_blocks
from sources.services.extract import Block


def words(text: str) -> int:
    return len(text.split())


def test_paragraphs_under_one_heading_are_packed() -> None:
    blocks = [Block("a b c", ("H",), None, 1, 1), Block("d e", ("H",), None, 3, 3),
              Block("f g", ("Other",), None, 5, 5)]
    chunks = chunk_blocks(blocks, max_tokens=10, count=words)
    assert [(c.text, c.heading, c.line_start, c.line_end) for c in chunks] == [
        ("a b c\n\nd e", ("H",), 1, 3), ("f g", ("Other",), 5, 5)]


def test_long_paragraph_split_on_sentences_within_limit() -> None:
    text = " ".join(f"Sentence number {i} has five words." for i in range(20))
    chunks = chunk_blocks([Block(text, (), 4, 10, 10)], max_tokens=12, count=words)
    assert len(chunks) > 5
    assert all(c.token_count <= 12 for c in chunks)
    assert all(c.page_start == 4 for c in chunks)
    assert " ".join(c.text for c in chunks).split() == text.split()


def test_huge_single_line_is_cut_between_words() -> None:
    text = "word " * 1000
    chunks = chunk_blocks([Block(text.strip(), (), None, 1, 1)], max_tokens=50, count=words)
    assert all(c.token_count <= 50 for c in chunks)
    assert sum(c.token_count for c in chunks) == 1000


def test_line_spans_follow_sentences() -> None:
    text = "Line one is here.\nLine two follows.\nLine three ends."
    chunks = chunk_blocks([Block(text, (), None, 7, 9)], max_tokens=4, count=words)
    assert [(c.line_start, c.line_end) for c in chunks] == [(7, 7), (8, 8), (9, 9)]
