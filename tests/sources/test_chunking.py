from __future__ import annotations

import pytest

from sources.services.chunking import chunk_blocks, chunk_windows
from sources.services.extract import Block


def words(text: str) -> int:
    return len(text.split())


def test_paragraphs_under_one_heading_are_packed() -> None:
    blocks = [
        Block("a b c", ("H",), None, 1, 1),
        Block("d e", ("H",), None, 3, 3),
        Block("f g", ("Other",), None, 5, 5),
    ]
    chunks = chunk_blocks(blocks, max_tokens=10, count=words)
    assert [(c.text, c.heading, c.line_start, c.line_end) for c in chunks] == [
        ("a b c\n\nd e", ("H",), 1, 3),
        ("f g", ("Other",), 5, 5),
    ]


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


def test_a_table_of_cells_starts_a_piece_whole_or_is_cut_between_its_rows() -> None:
    prose = "The gateway is supplied through X1. Terminal X3 passes the input voltage on."
    table = [
        "Parameter | Value",
        "Number of sensors | max. 8",  # no sentence ends after "max."
        "Baud rates | 9600 (default), 19200, 38400",
        "Galvanic isolation | 1.5 kV",
    ]
    text = "\n".join([prose, *table])
    # The prose and the table do not fit one chunk: the table starts the next one, its header first.
    chunks = chunk_blocks([Block(text, ("Interfaces",), 2, 4, 8)], max_tokens=26, count=words)
    assert [(c.text, c.line_start, c.line_end) for c in chunks] == [(prose, 4, 4), ("\n".join(table), 5, 8)]
    # A table longer than a chunk is cut between rows, never inside one.
    chunks = chunk_blocks([Block(text, ("Interfaces",), 2, 4, 8)], max_tokens=16, count=words)
    assert [c.text for c in chunks] == [prose, "\n".join(table[:3]), table[3]]
    assert [(c.line_start, c.line_end) for c in chunks] == [(4, 4), (5, 7), (8, 8)]


def test_a_markdown_table_is_cut_between_rows_its_rule_under_its_header() -> None:
    table = ["|Sensor|Address|", "|---|---|", *[f"|S{n}|{n}|" for n in range(1, 9)]]  # a word a line
    text = "\n".join(["Each sensor has an address.", *table])
    chunks = chunk_blocks([Block(text, (), None, 1, 11)], max_tokens=8, count=words)
    assert [c.text for c in chunks] == ["Each sensor has an address.", "\n".join(table[:8]), "\n".join(table[8:])]


def test_overlap_repeats_the_last_sentences_of_the_same_section() -> None:
    lines = [f"Fact {i} is short." for i in range(8)]  # 4 words each, one per line
    blocks = [Block("\n".join(lines), ("H",), None, 1, 8), Block("Other part.", ("K",), None, 10, 10)]
    plain = chunk_blocks(blocks, max_tokens=13, count=words)
    # A piece keeps its line breaks: each line stays a unit the reader quotes and cites on its own line.
    assert [c.text for c in plain] == ["\n".join(lines[a:b]) for a, b in ((0, 3), (3, 6), (6, 8))] + ["Other part."]
    assert [(c.line_start, c.line_end) for c in plain] == [(1, 3), (4, 6), (7, 8), (10, 10)]
    chunks = chunk_blocks(blocks, max_tokens=13, count=words, overlap_tokens=4)
    # Each chunk of section H starts with the previous chunk's last sentence; section K does not.
    assert [c.text for c in chunks] == [
        "\n".join(lines[0:2]),
        "\n".join(lines[1:3]),
        "\n".join(lines[2:4]),
        "\n".join(lines[3:5]),
        "\n".join(lines[4:6]),
        "\n".join(lines[5:7]),
        "\n".join(lines[6:8]),
        "Other part.",
    ]
    assert [(c.line_start, c.line_end) for c in chunks][:3] == [(1, 2), (2, 3), (3, 4)]  # cited lines stay exact
    assert all(c.token_count <= 13 for c in chunks)


def test_overlap_never_repeats_a_whole_chunk_or_exceeds_its_budget() -> None:
    sentences = [f"Sentence number {i} has five words." for i in range(30)]
    text = " ".join(sentences)
    for overlap in (1, 5, 9, 11):
        chunks = chunk_blocks([Block(text, (), None, 1, 1)], max_tokens=12, count=words, overlap_tokens=overlap)
        assert all(c.token_count <= 12 for c in chunks)
        held = [[s for s in sentences if s in c.text] for c in chunks]
        assert sorted({s for h in held for s in h}) == sorted(sentences)  # nothing lost
        for before, after in zip(held, held[1:]):
            assert after != before
            assert sum(words(s) for s in after if s in before) <= overlap


def test_overlap_must_be_below_half_the_chunk_size() -> None:
    import pytest
    from pydantic import ValidationError

    from core.config import IngestConfig

    assert IngestConfig(chunk_tokens=200, chunk_overlap_tokens=40).chunk_overlap_tokens == 40
    with pytest.raises(ValidationError, match="must be less than half of chunk_tokens"):
        IngestConfig(chunk_tokens=200, chunk_overlap_tokens=100)


def test_windows_are_every_run_of_consecutive_sentences() -> None:
    text = "One is first. Two follows it. Three is next.\n- Four is a list item"
    assert chunk_windows(text, sentences=2, limit=100) == [
        "One is first. Two follows it.",
        "Two follows it. Three is next.",
        "Three is next. - Four is a list item",
    ]
    assert chunk_windows(text, sentences=3, limit=100) == [
        "One is first. Two follows it. Three is next.",
        "Two follows it. Three is next. - Four is a list item",
    ]


def test_a_tables_rows_are_sentences_of_the_windows() -> None:
    # A table holds no sentence end: read as one sentence, a row's fact was embedded only inside the whole table.
    rows = "Parameter | Value\nWeight | 210 g\nTerminals | Screw terminals, torque 0.5 Nm"
    text = f"3 Environmental\n{rows}\nMount it. Done."
    assert chunk_windows(text, sentences=2, limit=100) == [
        "3 Environmental Parameter | Value",
        "Parameter | Value Weight | 210 g",
        "Weight | 210 g Terminals | Screw terminals, torque 0.5 Nm",
        "Terminals | Screw terminals, torque 0.5 Nm Mount it.",
        "Mount it. Done.",
    ]
    assert chunk_windows("| a | b |\n|---|---|\n| 1 | 2 |", sentences=2, limit=100) == [
        "| a | b | |---|---|",
        "|---|---| | 1 | 2 |",
    ]


def test_a_chunk_no_longer_than_a_window_has_none_and_zero_switches_windows_off() -> None:
    assert chunk_windows("Just one sentence. And a second.", sentences=2, limit=100) == []
    assert chunk_windows("A. B. C. D.", sentences=0, limit=100) == []


def test_the_window_limit_widens_the_stride_but_keeps_both_ends() -> None:
    text = " ".join(f"Sentence {i} ends here." for i in range(30))
    windows = chunk_windows(text, sentences=2, limit=5)
    assert len(windows) == 5
    assert windows[0] == "Sentence 0 ends here. Sentence 1 ends here."
    assert windows[-1] == "Sentence 28 ends here. Sentence 29 ends here."


def test_rows_under_their_header_keep_each_row_s_number() -> None:
    # A sheet's rows 2, 3 and 5 (row 4 empty) under the header of row 1, and a Word file's paragraphs: the chunk's
    # n-th line is no longer source line ``line_start + n``, so each line records the rows it stands for.
    rows = [Block(text, ("Pumps",), None, n, n, "Model | Flow", 1) for n, text in ((2, "P1 | 4"), (3, "P2 | 6"))]
    rows.append(Block("P3 | 9", ("Pumps",), None, 5, 5, "Model | Flow", 1))
    (chunk,) = chunk_blocks(rows, max_tokens=50, count=words)
    assert chunk.text == "Model | Flow\nP1 | 4\n\nP2 | 6\n\nP3 | 9"
    assert chunk.line_map == [None, [2, 2], None, [3, 3], None, [5, 5]]
    paragraphs = [
        Block("First.", (), None, 1, 1),
        Block("Second\nline.", (), None, 2, 2),
        Block("Third.", (), None, 3, 3),
    ]
    (chunk,) = chunk_blocks(paragraphs, max_tokens=50, count=words)
    assert chunk.line_map == [[1, 1], None, [2, 2], [2, 2], None, [3, 3]]


def test_a_text_that_maps_line_by_line_or_crosses_pages_needs_no_map() -> None:
    lines = [Block("a b\nc d", (), None, 4, 5), Block("e f", (), None, 7, 7)]
    (chunk,) = chunk_blocks(lines, max_tokens=50, count=words)
    assert chunk.text == "a b\nc d\n\ne f" and chunk.line_map is None
    pages = [Block("a b", (), 1, 40, 40), Block("c d", (), 2, 1, 1)]
    assert chunk_blocks(pages, max_tokens=50, count=words)[0].line_map is None


def test_a_block_cut_into_pieces_maps_each_piece_to_its_lines() -> None:
    text = "\n".join(f"Sentence number {i} has five words." for i in range(3))  # lines 3-5
    blocks = [Block(text, (), None, 3, 5), Block("Last one.", (), None, 8, 8)]
    chunks = chunk_blocks(blocks, max_tokens=14, count=words)
    assert [(c.text, c.line_map) for c in chunks] == [
        ("Sentence number 0 has five words.\nSentence number 1 has five words.", None),
        ("Sentence number 2 has five words.\n\nLast one.", [[5, 5], None, [8, 8]]),
    ]


def test_a_numbered_list_cut_by_the_chunk_limit_keeps_its_heading_above_the_rest() -> None:
    heading = Block("To replace the seal, do as follows:", ("Seal",), None, 1, 1)
    steps = [Block(f"{n}. Step number {n} of the seal replacement.", ("Seal",), None, 2 + n, 2 + n) for n in (1, 2, 3)]
    after = Block("Other text follows here.", ("Seal",), None, 9, 9)
    chunks = chunk_blocks([heading, *steps, after], max_tokens=26, count=words)
    assert [c.text.split("\n\n") for c in chunks] == [
        [heading.text, steps[0].text, steps[1].text],
        [heading.text, steps[2].text, after.text],
    ]
    assert (chunks[1].line_start, chunks[1].line_end) == (1, 9)
    assert chunks[1].line_map == [[1, 1], None, [5, 5], None, [9, 9]]  # a quote of the heading cites its own line
    assert all(c.token_count <= 26 for c in chunks)


def test_only_a_list_that_goes_on_gets_its_heading_again() -> None:
    heading = Block("To replace the seal, do as follows:", ("Seal",), None, 1, 1)
    steps = [Block(f"{n}. Step number {n} of the seal replacement.", ("Seal",), None, 2 + n, 2 + n) for n in (1, 2)]
    for following in (
        "1. A new list of one step here.",
        "4. Not the step after the last.",
        "Prose after the list here.",
    ):
        blocks = [heading, *steps, Block(following, ("Seal",), None, 9, 9)]
        assert chunk_blocks(blocks, max_tokens=26, count=words)[-1].text == following
    prose = Block("Some prose stands here. It goes on.", ("Seal",), None, 1, 1)  # no heading: a paragraph
    third = Block("3. The third step of the seal replacement here.", ("Seal",), None, 9, 9)
    assert chunk_blocks([prose, *steps, third], max_tokens=26, count=words)[-1].text == third.text
    # A heading that does not fit beside the next step is not repeated: the limit holds.
    long_step = Block("3. " + " ".join(["word"] * 15), ("Seal",), None, 9, 9)
    long_heading = Block("To replace the seal at the end, do as follows:", ("Seal",), None, 1, 1)
    chunks = chunk_blocks([long_heading, *steps, long_step], max_tokens=26, count=words)
    assert [c.text for c in chunks][1:] == [f"{long_heading.text}\n\n{steps[1].text}", long_step.text]
    assert all(c.token_count <= 26 for c in chunks)


@pytest.mark.parametrize("mark", ["{n}.", "{n})", "{letter}.", "{letter})"])
def test_a_list_item_is_never_cut_after_its_number(mark: str) -> None:
    lines = [
        f"{mark.format(n=n, letter='abcdef'[n - 1])} Check the gauge number {n} and write it down." for n in range(1, 7)
    ]
    chunks = chunk_blocks([Block("\n".join(lines), (), None, 1, 6)], max_tokens=25, count=words)
    assert len(chunks) > 1
    assert [line for chunk in chunks for line in chunk.text.splitlines()] == lines


def test_a_lettered_list_cut_by_the_chunk_limit_keeps_its_heading_above_the_rest() -> None:
    heading = Block("To replace the seal, do as follows:", ("Seal",), None, 1, 1)
    steps = [f"{letter}) Step {letter} of the seal replacement." for letter in "abcde"]
    chunks = chunk_blocks([heading, Block("\n".join(steps), ("Seal",), None, 3, 7)], max_tokens=24, count=words)
    assert [c.text for c in chunks] == [
        f"{heading.text}\n\n{steps[0]}\n{steps[1]}",
        f"{heading.text}\n\n{steps[2]}\n{steps[3]}",
        f"{heading.text}\n\n{steps[4]}",
    ]
