"""Structure-aware chunking: paragraphs under one heading are packed together up to a
token limit; an oversized paragraph is split on sentences, an oversized sentence on words.

Sizes are counted with the embedding model's own tokenizer, so a chunk is never
silently truncated by the embedder.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace

from core.units import CELL_SEPARATOR, LineMap, continued_head, maps_line_by_line, number_alone, numbered_lines
from sources.services.extract import Block

# After a newline only horizontal space may precede a list marker: with ``\s*`` a
# run of n newlines (possible inside one JSON value) cost n² steps.
_SENTENCE_END = re.compile(r"(?<=[.!?;:])\s+(?=[\"'(\[]?[A-Z0-9À-Ý])|\n(?=[^\S\n]*(?:[-*•\d]|[a-z][.)]\s))")
# A table written as cells (a PDF's, or a Markdown table in a paragraph) stays in one piece of a block when it fits,
# else opens a piece and is cut between rows: never inside a row, nor at the "." of "max. | 8". A row is a line holding
# cells joined by `` | ``, or one between pipes ("|---|---|", "|a|b|").
_ROW = rf"(?:[^\n]*{re.escape(CELL_SEPARATOR)}[^\n]*|[^\S\n]*\|[^\n]*\|[^\S\n]*)"
_ROW_LINE = re.compile(rf"^{_ROW}$", re.MULTILINE)
_TABLE_LINES = re.compile(rf"^{_ROW}(?:\n{_ROW})*$", re.MULTILINE)

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
    ocr_confidence: float | None = None  # lowest OCR confidence of its blocks; None when no block was OCR'd
    line_map: LineMap | None = None  # the source lines of each line of ``text`` (``Chunk.line_map``)


# A word-piece count says nothing about length for text the tokenizer cannot split:
# BERT-style tokenizers turn any word over 100 characters (base64, a data: URI, a
# run of one character) into a single [UNK]. Chunks are therefore capped in
# characters as well: generous for prose (~4-5 characters per word piece), tight
# enough that a 10 MB line can never become one 10 MB "one-token" chunk.
CHARS_PER_TOKEN_CAP = 10


def chunk_blocks(
    blocks: Iterable[Block],
    *,
    max_tokens: int,
    count: TokenCounter,
    max_chars: int | None = None,
    overlap_tokens: int = 0,
) -> list[ChunkDraft]:
    """Pack blocks into chunks of at most ``max_tokens`` (and ``max_chars``) without crossing a heading.

    With ``overlap_tokens``, a chunk that continues the same section starts with the
    last pieces (paragraphs or sentences) of the one before, up to that many tokens;
    its line range starts at the first repeated piece, so citations stay exact.
    Linear in the length of the text: every piece of text is counted a bounded
    number of times, however long its lines or words are.
    """
    max_chars = max_chars or max_tokens * CHARS_PER_TOKEN_CAP
    drafts: list[ChunkDraft] = []
    pending: deque[_Piece] = deque()
    tokens = chars = 0  # of the pending pieces, with their lead
    leads: dict[str, int] = {"": 0}  # tokens of each lead (a table header repeated in every chunk of its rows)

    def fits(size: int, length: int) -> bool:
        return tokens + size + len(pending) <= max_tokens and chars + length + 2 <= max_chars

    for block in _bounded_leads(blocks, leads, max_tokens=max_tokens, max_chars=max_chars, count=count):
        lead_size, lead_chars = leads[block.lead], len(block.lead) + 1 if block.lead else 0
        for piece in _fit(
            block,
            max_tokens=max(1, max_tokens - lead_size),
            max_chars=max(16, max_chars - lead_chars),
            count=count,
            # A numbered list is cut a step at a time, so that a chunk holds as many steps as fit after what stands
            # before them (its heading), and the next chunk the rest, under its heading again (``_list_head``).
            sentences=overlap_tokens > 0 or numbered_lines(block.text) > 1,
        ):
            same_section = not pending or _same_section(pending[-1].block, piece.block)
            if not pending:
                tokens, chars = lead_size, lead_chars
            if pending and (not same_section or not fits(piece.size, len(piece.block.text))):
                drafts.append(_merge(pending, count))
                kept = _tail(pending, overlap_tokens) if same_section else []
                head = _list_head(pending, drafts[-1].text, piece) if same_section else None
                if head is not None and head not in kept:  # what follows it stands a blank line apart
                    if kept:
                        kept[0] = replace(kept[0], continues=False)
                    else:
                        piece = replace(piece, continues=False)
                    kept = [head, *kept]
                pending = deque(kept)
                tokens = lead_size + sum(p.size for p in pending)
                chars = lead_chars + sum(len(p.block.text) + 2 for p in pending)
                while pending and not fits(piece.size, len(piece.block.text)):
                    dropped = pending.popleft()
                    tokens, chars = tokens - dropped.size, chars - len(dropped.block.text) - 2
            pending.append(piece)
            tokens += piece.size
            chars += len(piece.block.text) + 2
    if pending:
        drafts.append(_merge(pending, count))
    return drafts


def _bounded_leads(
    blocks: Iterable[Block], leads: dict[str, int], *, max_tokens: int, max_chars: int, count: TokenCounter
) -> Iterator[Block]:
    """The blocks, each lead's size counted once into ``leads``. A lead that would take more than half
    of a chunk (a header row of hundreds of columns) is not repeated: it stands once, as a block of
    its own before the first block that had it, and those blocks go on without it."""
    for block in blocks:
        if block.lead not in leads:
            size = count(block.lead) + 1
            small = size <= max_tokens // 2 and len(block.lead) <= max_chars // 2
            leads[block.lead] = size if small else -1
            if not small:
                yield replace(block, text=block.lead, lead="", line_end=block.line_start)
        yield block if leads[block.lead] >= 0 else replace(block, lead="")


def _same_section(a: Block, b: Block) -> bool:
    return a.heading == b.heading and a.lead == b.lead and a.unit == b.unit


@dataclass(frozen=True)
class _Piece:
    block: Block
    size: int  # tokens
    continues: bool = False  # the rest of the previous piece's paragraph (joined by a space)


def _tail(parts: deque[_Piece], budget: int) -> list[_Piece]:
    """The last pieces of a chunk (never all of them) holding at most ``budget`` tokens."""
    kept: list[_Piece] = []
    if budget <= 0:
        return kept
    for part in reversed(list(parts)[1:]):
        if part.size > budget:
            break
        kept.append(part)
        budget -= part.size
    return kept[::-1]


def _list_head(parts: deque[_Piece], text: str, piece: _Piece) -> _Piece | None:
    """The piece of the chunk just made (``parts``, its ``text``) that holds the heading of the numbered list
    ``piece`` goes on with (``core.units.continued_head``), to stand again above the rest of the list."""
    heading = continued_head(text, piece.block.text)
    return next((p for p in reversed(parts) if heading and heading in p.block.text), None)


def _merge(parts: deque[_Piece], count: TokenCounter) -> ChunkDraft:
    pieces = list(parts)
    blocks = [p.block for p in pieces]
    text = blocks[0].text + "".join(
        (_gap(before.block, p.block) if p.continues else "\n\n") + p.block.text for before, p in zip(pieces, pieces[1:])
    )
    if blocks[0].lead:
        text = f"{blocks[0].lead}\n{text}"
    pages = [b.page for b in blocks if b.page is not None]
    confidences = [b.ocr for b in blocks if b.ocr is not None]
    page_start, page_end = (min(pages), max(pages)) if pages else (None, None)
    line_start, line_end = blocks[0].line_start, blocks[-1].line_end
    # Lines restart on every page: a chunk across a page break is cited whole, and needs no map.
    mapped = page_start == page_end and not maps_line_by_line(text, line_start, line_end, page_start, page_end)
    return ChunkDraft(
        text=text,
        heading=blocks[0].heading,
        page_start=page_start,
        page_end=page_end,
        line_start=line_start,
        line_end=line_end,
        token_count=count(text) if len(parts) > 1 or blocks[0].lead else parts[0].size,
        ocr_confidence=min(confidences) if confidences else None,
        line_map=_line_map(pieces) if mapped else None,
    )


def _line_map(pieces: list[_Piece]) -> LineMap:
    """The source lines ``[first, last]`` of each line of the text ``_merge`` makes of ``pieces``: None for the
    lead (a table's header row, repeated over every chunk of its rows) and the blank line between blocks."""
    lead = pieces[0].block.lead
    out: LineMap = [None] * (lead.count("\n") + 1) if lead else []
    previous: Block | None = None
    for piece in pieces:
        block = piece.block
        spans = _block_spans(block)
        if previous is not None and piece.continues and block.line_start <= previous.line_end:
            last = out[-1] or spans[0]  # joined by a space: the first line goes on the line before
            out[-1] = [min(last[0], spans[0][0]), max(last[1], spans[0][1])]
            spans = spans[1:]
        elif previous is not None and piece.continues:
            out += [[n, n] for n in range(previous.line_end + 1, block.line_start)]  # the lines between
        elif previous is not None:
            out.append(None)
        out += spans
        previous = block
    return out


def _block_spans(block: Block) -> list[list[int]]:
    """The source lines of each line of ``block.text``: one each while the text has as many lines as its span;
    its last line holds the rest of the span (lines joined into one), and lines past the span (a paragraph's
    line breaks) stand on its last."""
    count = block.text.count("\n") + 1
    spans = [[min(block.line_start + i, block.line_end)] * 2 for i in range(count)]
    spans[-1][1] = block.line_end
    return spans


def _gap(before: Block, after: Block) -> str:
    """What stands between two pieces of one block: the line breaks between them, or a space on one line."""
    return "\n" * (after.line_start - before.line_end) or " "


def _fit(
    block: Block, *, max_tokens: int, max_chars: int, count: TokenCounter, sentences: bool = False
) -> list[_Piece]:
    """The block itself if it fits, else sentence-sized pieces that each fit: as many
    sentences as fit per piece, or (``sentences``, for overlapping chunks) one each.

    Word-piece counts add up over whitespace, so pieces are sized by summing the
    counts of their sentences instead of re-counting ever longer strings.
    """
    if len(block.text) <= max_chars:
        size = count(block.text)
        if size <= max_tokens:
            return [_Piece(block, size)]
    pieces: list[_Piece] = []
    lines = _LineCounter(block)

    def cut(start: int, end: int, used: int) -> None:
        # The piece verbatim: a list keeps its items on their lines, so a quote of one cites its own line.
        pieces.append(_Piece(lines.piece(block.text[start:end], start, end), used, bool(pieces)))

    buf_start = buf_end = -1
    used = 0
    for start, sentence, opens in _tables_and_sentences(
        block.text, lambda text: len(text) <= max_chars and count(text) <= max_tokens
    ):
        for k, (sub_start, sub, size) in enumerate(
            _split_long(sentence, start, max_tokens=max_tokens, max_chars=max_chars, count=count)
        ):
            sub_end = sub_start + len(sub)
            full = used + size > max_tokens or sub_end - buf_start > max_chars
            if buf_end >= 0 and (sentences or (opens and k == 0) or full):
                cut(buf_start, buf_end, used)
                buf_end, used = -1, 0
            if buf_end < 0:
                buf_start = sub_start
            buf_end = sub_end
            used += size
    if buf_end >= 0:
        cut(buf_start, buf_end, used)
    return pieces


class _LineCounter:
    """Line spans of pieces cut from one block, counting newlines only once (pieces come in order)."""

    def __init__(self, block: Block) -> None:
        self.block = block
        self.offset = 0
        self.line = block.line_start

    def piece(self, text: str, offset: int, end: int) -> Block:
        """The piece ``text`` found at ``offset:end`` of the block (its own newlines may be gone)."""
        if offset >= self.offset:
            self.line += self.block.text.count("\n", self.offset, offset)
        else:  # never expected (pieces are in order); recount rather than guess
            self.line = self.block.line_start + self.block.text.count("\n", 0, offset)
        self.offset = offset
        return Block(
            text,
            self.block.heading,
            self.block.page,
            self.line,
            self.line + self.block.text.count("\n", offset, end),
            self.block.lead,
            self.block.unit,
            self.block.ocr,
        )


def _sentences(text: str, start: int = 0, end: int | None = None, *, numbered: bool = True) -> list[tuple[int, str]]:
    """(offset, text) of the sentences of ``text[start:end]``; a list item's number ("7." of "7. Check …") opens its
    sentence, or with ``numbered`` False stands as a part of its own (``chunk_windows``)."""
    end = len(text) if end is None else end
    out = []
    for match in _SENTENCE_END.finditer(text, start, end):
        if numbered and number_alone(text, text.rfind("\n", 0, match.start()) + 1, match.start()):
            continue
        if text[start : match.start()].strip():
            out.append((start, text[start : match.start()]))
        start = match.end()
    if text[start:end].strip():
        out.append((start, text[start:end]))
    return out


def _tables_and_sentences(
    text: str, fits: Callable[[str], bool], *, numbered: bool = True
) -> list[tuple[int, str, bool]]:
    """(offset, text, opens) of ``_sentences`` (opening nothing) and of the lines of each table (``_TABLE_LINES``):
    all of them at once when they ``fit``, else a row at a time, the first opening a piece of its own."""
    out, start = [], 0
    for table in _TABLE_LINES.finditer(text):
        out += [(at, sentence, False) for at, sentence in _sentences(text, start, table.start(), numbered=numbered)]
        if fits(table[0]):
            out.append((table.start(), table[0], False))
        else:
            rows = _ROW_LINE.finditer(text, table.start(), table.end())
            out += [(row.start(), row[0], i == 0) for i, row in enumerate(rows)]
        start = table.end()
    return out + [(at, sentence, False) for at, sentence in _sentences(text, start, numbered=numbered)]


def _split_long(
    sentence: str, offset: int, *, max_tokens: int, max_chars: int, count: TokenCounter
) -> list[tuple[int, str, int]]:
    """(offset, text, tokens) pieces of a sentence, cut between words when it is too long.

    Each piece is a window of at most ``max_chars`` characters, cut back to the
    last whitespace and shrunk until it fits, then counted once. Counting the
    rest of the sentence again after every cut (as an earlier version did) is
    quadratic: a 200 KB base64 line took more than five minutes.
    """
    if len(sentence) <= max_chars:
        size = count(sentence)
        if size <= max_tokens:
            return [(offset + len(sentence) - len(sentence.lstrip()), sentence.strip(), size)]
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


def chunk_windows(text: str, *, sentences: int, limit: int) -> list[str]:
    """Every run of ``sentences`` consecutive sentences of a chunk (stride 1), to embed beside the chunk; a table's rows
    count as sentences, so a fact in one row of a long table is found by its row ("Terminals | … torque 0.5 Nm").

    A chunk is then found by its best window as well as by its whole text (the dense
    channel scores a chunk by the best of its vectors; docs/decisions.md, D0013).
    A chunk of no more than ``sentences`` sentences has no window: its one window would
    be the chunk itself. ``limit`` caps the windows of one chunk (the store gives each
    chunk that many slots); past it the windows are spread evenly over the chunk, its first
    and last kept (the chunk's own vector still covers the whole text).
    """
    if sentences <= 0:
        return []
    # A row a part, and a list item's number a part of its own: a window of two parts is then one numbered item
    # ("3." and its text), which finds a step better than a window of two steps (bench/multilingual.py, D0047).
    parts = [part.strip() for _, part, _ in _tables_and_sentences(text, fits=lambda _: False, numbered=False)]
    if len(parts) <= sentences:
        return []
    starts = range(len(parts) - sentences + 1)
    stride = -(-len(starts) // limit)
    picked = list(starts[::stride])
    if picked[-1] != starts[-1]:  # the last window, so the chunk's end is in one
        picked[-1] = starts[-1]
    return [" ".join(parts[i : i + sentences]) for i in picked]
