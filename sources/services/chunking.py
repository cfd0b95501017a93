"""Structure-aware chunking: paragraphs under one heading are packed together up to a
token limit; an oversized paragraph is split on sentences, an oversized sentence on words.

Sizes are counted with the embedding model's own tokenizer, so a chunk is never
silently truncated by the embedder.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from sources.services.extract import Block

_SENTENCE_END = re.compile(r"(?<=[.!?;:])\s+(?=[\"'(\[]?[A-Z0-9À-Ý])|\n(?=\s*[-*•\d])")

TokenCounter = Callable[[str], int]


@dataclass(frozen=True)
class ChunkDraft:
    text: str
    heading: tuple[str, ...]
    page_start: int | None
    page_end: int | None
    line_start: int
    line_end: int
    token_count: int


def chunk_blocks(blocks: Iterable[Block], *, max_tokens: int, count: TokenCounter) -> list[ChunkDraft]:
    """Pack blocks into chunks of at most ``max_tokens`` without crossing a heading."""
    drafts: list[ChunkDraft] = []
    pending: list[tuple[Block, int]] = []

    def flush() -> None:
        if pending:
            drafts.append(_merge(pending, count))
            pending.clear()

    for block in blocks:
        for piece in _fit(block, max_tokens=max_tokens, count=count):
            size = count(piece.text)
            same_section = not pending or pending[-1][0].heading == piece.heading
            total = sum(s for _, s in pending) + size + len(pending)
            if pending and (not same_section or total > max_tokens):
                flush()
            pending.append((piece, size))
    flush()
    return drafts


def _merge(parts: list[tuple[Block, int]], count: TokenCounter) -> ChunkDraft:
    blocks = [b for b, _ in parts]
    text = "\n\n".join(b.text for b in blocks)
    pages = [b.page for b in blocks if b.page is not None]
    return ChunkDraft(
        text=text,
        heading=blocks[0].heading,
        page_start=min(pages) if pages else None,
        page_end=max(pages) if pages else None,
        line_start=blocks[0].line_start,
        line_end=blocks[-1].line_end,
        token_count=count(text),
    )


def _fit(block: Block, *, max_tokens: int, count: TokenCounter) -> list[Block]:
    """The block itself if it fits, else sentence-sized pieces that each fit.

    Word-piece counts add up over whitespace, so pieces are sized by summing the
    counts of their sentences instead of re-counting ever longer strings.
    """
    if count(block.text) <= max_tokens:
        return [block]
    pieces: list[Block] = []
    buf: list[str] = []
    buf_start = 0
    used = 0
    for start, sentence in _sentences(block.text):
        for sub_start, sub, size in _split_words(sentence, start, max_tokens=max_tokens, count=count):
            if buf and used + size > max_tokens:
                pieces.append(_piece(block, " ".join(buf), buf_start))
                buf, used = [], 0
            if not buf:
                buf_start = sub_start
            buf.append(sub.strip())
            used += size
    if buf:
        pieces.append(_piece(block, " ".join(buf), buf_start))
    return pieces


def _piece(block: Block, text: str, offset: int) -> Block:
    first = block.line_start + block.text.count("\n", 0, offset)
    return Block(text, block.heading, block.page, first, first + text.count("\n"))


def _sentences(text: str) -> list[tuple[int, str]]:
    out = []
    start = 0
    for match in _SENTENCE_END.finditer(text):
        if text[start:match.start()].strip():
            out.append((start, text[start:match.start()]))
        start = match.end()
    if text[start:].strip():
        out.append((start, text[start:]))
    return out


def _split_words(sentence: str, offset: int, *, max_tokens: int,
                 count: TokenCounter) -> list[tuple[int, str, int]]:
    """(offset, text, tokens) pieces of a sentence, cut between words when it is too long."""
    size = count(sentence)
    if size <= max_tokens:
        return [(offset, sentence, size)]
    out: list[tuple[int, str, int]] = []
    current: list[str] = []
    current_start = offset
    used = 0
    for match in re.finditer(r"\S+", sentence):
        pos, word = offset + match.start(), match.group()
        size = count(word)
        while size > max_tokens:  # one "word" longer than a chunk: cut it by characters
            cut = max(1, len(word) * max_tokens // (size + 1))
            out.append((pos, word[:cut], count(word[:cut])))
            pos, word = pos + cut, word[cut:]
            size = count(word)
        if current and used + size > max_tokens:
            out.append((current_start, " ".join(current), used))
            current, used = [], 0
        if not current:
            current_start = pos
        current.append(word)
        used += size
    if current:
        out.append((current_start, " ".join(current), used))
    return out
