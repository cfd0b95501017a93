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

# After a newline only horizontal space may precede a list marker: with ``\s*`` a
# run of n newlines (possible inside one JSON value) cost n² steps.
_SENTENCE_END = re.compile(r"(?<=[.!?;:])\s+(?=[\"'(\[]?[A-Z0-9À-Ý])|\n(?=[^\S\n]*[-*•\d])")

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


# A word-piece count says nothing about length for text the tokenizer cannot split:
# BERT-style tokenizers turn any word over 100 characters (base64, a data: URI, a
# run of one character) into a single [UNK]. Chunks are therefore capped in
# characters as well: generous for prose (~4-5 characters per word piece), tight
# enough that a 10 MB line can never become one 10 MB "one-token" chunk.
CHARS_PER_TOKEN_CAP = 10


def chunk_blocks(blocks: Iterable[Block], *, max_tokens: int, count: TokenCounter,
                 max_chars: int | None = None) -> list[ChunkDraft]:
    """Pack blocks into chunks of at most ``max_tokens`` (and ``max_chars``) without crossing a heading.

    Linear in the length of the text: every piece of text is counted a bounded
    number of times, however long its lines or words are.
    """
    max_chars = max_chars or max_tokens * CHARS_PER_TOKEN_CAP
    drafts: list[ChunkDraft] = []
    pending: list[tuple[Block, int]] = []
    tokens = chars = 0

    def flush() -> None:
        nonlocal tokens, chars
        if pending:
            drafts.append(_merge(pending, count))
            pending.clear()
        tokens = chars = 0

    for block in blocks:
        for piece, size in _fit(block, max_tokens=max_tokens, max_chars=max_chars, count=count):
            same_section = not pending or pending[-1][0].heading == piece.heading
            if pending and (not same_section or tokens + size + len(pending) > max_tokens
                            or chars + len(piece.text) + 2 > max_chars):
                flush()
            pending.append((piece, size))
            tokens += size
            chars += len(piece.text) + 2
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
        token_count=count(text) if len(parts) > 1 else parts[0][1],
    )


def _fit(block: Block, *, max_tokens: int, max_chars: int, count: TokenCounter) -> list[tuple[Block, int]]:
    """(piece, tokens): the block itself if it fits, else sentence-sized pieces that each fit.

    Word-piece counts add up over whitespace, so pieces are sized by summing the
    counts of their sentences instead of re-counting ever longer strings.
    """
    if len(block.text) <= max_chars:
        size = count(block.text)
        if size <= max_tokens:
            return [(block, size)]
    pieces: list[tuple[Block, int]] = []
    lines = _LineCounter(block)
    buf: list[str] = []
    buf_start = 0
    used = chars = 0
    for start, sentence in _sentences(block.text):
        for sub_start, sub, size in _split_long(sentence, start, max_tokens=max_tokens, max_chars=max_chars,
                                                count=count):
            if buf and (used + size > max_tokens or chars + len(sub) + 1 > max_chars):
                pieces.append((lines.piece(" ".join(buf), buf_start), used))
                buf, used, chars = [], 0, 0
            if not buf:
                buf_start = sub_start
            buf.append(sub)
            used += size
            chars += len(sub) + 1
    if buf:
        pieces.append((lines.piece(" ".join(buf), buf_start), used))
    return pieces


class _LineCounter:
    """Line spans of pieces cut from one block, counting newlines only once (pieces come in order)."""

    def __init__(self, block: Block) -> None:
        self.block = block
        self.offset = 0
        self.line = block.line_start

    def piece(self, text: str, offset: int) -> Block:
        if offset >= self.offset:
            self.line += self.block.text.count("\n", self.offset, offset)
        else:  # never expected (pieces are in order); recount rather than guess
            self.line = self.block.line_start + self.block.text.count("\n", 0, offset)
        self.offset = offset
        return Block(text, self.block.heading, self.block.page, self.line, self.line + text.count("\n"))


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


def _split_long(sentence: str, offset: int, *, max_tokens: int, max_chars: int,
                count: TokenCounter) -> list[tuple[int, str, int]]:
    """(offset, text, tokens) pieces of a sentence, cut between words when it is too long.

    Each piece is a window of at most ``max_chars`` characters, cut back to the
    last whitespace and shrunk until it fits, then counted once. Counting the
    rest of the sentence again after every cut (as an earlier version did) is
    quadratic: a 200 KB base64 line took more than five minutes.
    """
    if len(sentence) <= max_chars:
        size = count(sentence)
        if size <= max_tokens:
            return [(offset, sentence.strip(), size)]
    out: list[tuple[int, str, int]] = []
    i, n = 0, len(sentence)
    width = max_chars  # the next window: a little wider than the last piece that fitted
    while i < n:
        while i < n and sentence[i].isspace():
            i += 1
        if i >= n:
            break
        end = min(n, i + width)
        while True:
            cut = _cut_point(sentence, i, end, n)
            piece = sentence[i:cut]
            size = count(piece)
            if size <= max_tokens or cut - i <= 1:
                break
            end = i + max(1, (cut - i) * max_tokens // (size + 1))
        if piece.strip():
            out.append((offset + i, piece.strip(), size))
        width = min(max_chars, max(16, (cut - i) * 5 // 4))
        i = cut
    return out


def _cut_point(text: str, start: int, end: int, n: int) -> int:
    """``end``, moved back to just before the last whitespace in ``text[start:end]`` when it falls inside a word."""
    if end >= n or text[end].isspace():
        return end
    for back in range(end - 1, start, -1):
        if text[back].isspace():
            return back
        if end - back > 200:  # no space nearby: a URL or base64 run, cut it where the window ends
            break
    return end
