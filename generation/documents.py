"""Document generation: an approved feature spec + source summaries + retrieved chunks
→ a grounded Markdown document with ``[^N]`` footnotes and a source list.

The spec arrives as text (``SpecText``): ``generation`` does not import ``specs``
(dependency direction), the caller resolves which approved spec applies.
Guarantees: the retrieval gate runs first (no evidence ⇒ failed run, no LLM
call, no file); the output file is written atomically (temp file + rename), so an
interrupted run never leaves half a document; a run is claimed by a conditional
update, so executing it twice does the work once.
"""

from __future__ import annotations

import logging
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings

from foundry_site.core import llm, prompts
from foundry_site.core.config import EXTRACTIVE
from foundry_site.core.text import TextRejected, user_text
from generation.context import chunk_budget, context_build, fence_escape
from foundry_site.core.grounding import Grounded, Sentence, content_words, split_sentences
from generation.models import GenerationRun
from foundry_site.core.grounding import Grounder
from retrieval.services.retrieve import Candidate, Retrieval, retrieve
from sources.models import Source, SourceSummary, location_text

logger = logging.getLogger(__name__)

_LIST_PREFIX = re.compile(r"^(\s*(?:[-*+]|\d+[.)])\s+)")
_MARKER = re.compile(r"\[(S\d+)\]")
# Markup the model writes although the sources are Markdown or text: script and style elements with
# their content, ``<<topic>>`` template placeholders, HTML comments, declarations (``<!DOCTYPE …>``,
# ``<?xml …?>``) and tags (``<p>``, ``</div>``, ``<br/>``).
_MARKUP = (
    re.compile(r"<(script|style)\b[^>]*>.*?(?:</\1\s*>|$)", re.IGNORECASE),
    re.compile(r"<<[^<>\n]*>>"),
    re.compile(r"<!--.*?(?:-->|$)"),
    re.compile(r"<[!?][^<>]*>"),
    re.compile(r"</?[A-Za-z][\w:.-]*(?:\s[^<>]*)?/?>"),
)
_HTML_START = re.compile(r"<(?=[A-Za-z/!?])")


@dataclass(frozen=True)
class SpecText:
    name: str
    version: int
    body: str


@dataclass
class Prepared:
    retrieval: Retrieval
    included: list[Candidate]
    system: str


class GenerationError(Exception):
    """A run cannot proceed; the message is shown to the user and stored on the run."""


MAX_TOPIC_CHARS = 1000


def topic_clean(topic: str) -> str:
    """The topic with NULs made spaces and outer whitespace stripped; GenerationError when unusable.

    The same limit as the web form and the API (1000 characters) holds for the CLI.
    """
    try:
        return user_text(topic, what="topic", max_chars=MAX_TOPIC_CHARS, collapse=False)
    except TextRejected as exc:
        raise GenerationError(str(exc)) from None


def topic_request(topic: str) -> str:
    """The user message of a generation call: the topic, then the task once more, after the passages.

    Given only "Topic: …", SmolLM2-135M continued the ``<context>`` block it had just read instead
    of writing (0 of the 5 sample documents of ``bench/generate_docs.py`` on an AVX-512 EPYC host);
    with the task restated last, 4 of 5 (docs/benchmarks.md, "Document generation").
    """
    return (
        f"Topic: {topic}\n\nWrite the document about this topic now, in Markdown, using only sentences "
        "from the passages, each followed by its passage id like [S1]."
    )


def document_prepare(*, topic: str, spec: SpecText, collection_ids: list[int] | None) -> Prepared:
    """Retrieval and the assembled system prompt; makes no generation call (used by --dry-run)."""
    conf = settings.FOUNDRY
    topic = topic_clean(topic)
    retrieval = retrieve(question=topic, collection_ids=collection_ids)
    if not retrieval.gate.passed or not retrieval.candidates:
        return Prepared(retrieval, [], "")
    if conf.generation.model == EXTRACTIVE:  # the writer quotes; there is no prompt (generation.writer)
        return Prepared(retrieval, retrieval.candidates, "")
    summaries = _summaries(retrieval.candidates, conf.generation.max_source_summaries)
    frame = dict(
        feature_spec_content=spec.body,
        max_source_summaries=conf.generation.max_source_summaries,
        source_summaries=summaries or "(none)",
    )
    model = conf.generation.model
    overhead = llm.count_tokens(prompts.render("generate_system", retrieved_chunks="", **frame) + topic, model=model)
    budget = chunk_budget(
        model=model, configured=conf.generation.token_budget, reserved=overhead + conf.generation.max_document_tokens
    )
    built = context_build(retrieval.candidates[: conf.generation.max_passages * 2], model=model, budget=budget)
    return Prepared(retrieval, built.included, prompts.render("generate_system", retrieved_chunks=built.text, **frame))


def _summaries(candidates: list[Candidate], limit: int) -> str:
    """Summaries of the retrieved chunks' sources, best-ranked source first, at most ``limit``."""
    order = list(dict.fromkeys(c.chunk.source_id for c in candidates))[:limit]
    found = {s.source_id: s for s in SourceSummary.objects.filter(source_id__in=order).select_related("source")}
    # Summaries are model output about document text, so they may carry its injections too.
    return "\n".join(
        fence_escape(f"- {found[sid].source.name}: {' '.join(found[sid].text.split())}")
        for sid in order
        if sid in found
    )


def generation_run_create(
    *,
    topic: str,
    spec: SpecText,
    output_path: str | None = None,
    user: Any = None,
    collection_ids: list[int] | None = None,
) -> GenerationRun:
    topic = topic_clean(topic)
    run = GenerationRun.objects.create(
        topic=topic,
        spec_name=spec.name,
        spec_version=spec.version,
        spec_body=spec.body,
        created_by=user if getattr(user, "is_authenticated", False) else None,
        collection_ids=collection_ids,
        output_path=output_path or "",
    )
    if not output_path:
        run.output_path = str(settings.FOUNDRY_HOME / "outputs" / f"run-{run.pk}.md")
        GenerationRun.objects.filter(pk=run.pk).update(output_path=run.output_path)
    return run


def generation_run_execute(*, run_id: int) -> None:
    """Execute a pending run once; a run that is not pending (or gone) is left alone.

    With a broker the model work goes to the ``compute`` queue and this returns
    once it is sent; without one every step runs here (see ``generation.pipeline``).
    """
    from generation import pipeline  # the pipeline builds on this module's functions

    pipeline.generation_run_start(run_id=run_id)


def ground_markdown(
    text: str,
    included: list[Candidate] | dict[str, str],
    *,
    embedding_model: str | None = None,
    min_support: float | None = None,
) -> Grounded:
    """Ground every prose line and table row; headings and blank lines stay, unsupported sentences go.

    ``included``: the passages given to the model, or their texts by label.
    HTML tags, comments and ``<<…>>`` placeholders the model wrote are removed first (``_markup_strip``).
    As in answers (``grounding.ground``), a sentence or row the model repeats, anywhere in the document,
    is checked, kept and counted once, and a refusal phrase is neither kept nor counted; so is a fragment
    that states nothing (``_is_claim``), like a heading.
    Returns the markdown with [S#] markers as ``text``, the sentences written (``total``) and
    kept (``supported``), and each counted sentence's (or table row's) verdict for the audit.
    """
    grounder = Grounder(included, embedding_model=embedding_model, min_support=min_support)
    lines = [_markup_strip(line) for line in text.splitlines()]
    rows = _table_body_rows(lines)
    claims = {i: _claims(line) for i, line in enumerate(lines) if i not in rows and _is_prose(line)}
    grounder.prime([_as_written(s) for found in claims.values() for s in found])
    out: list[str | None] = []
    result = Grounded(text="")
    seen: set[str] = set()  # lower-cased sentences (and rows) already checked, as ``grounding.ground`` keeps
    for i, line in enumerate(lines):
        if i in rows:
            out.append(_ground_row(grounder, line, seen, result))
        elif i in claims:
            out.append(_ground_prose(grounder, line, claims[i], seen, result))
        elif line.strip("# \t") or not line.strip():  # a heading that was only markup goes
            out.append(line.rstrip())
    result.text = _drop_empty_sections([markup_escape(line) for line in out if line is not None])
    result.coverage = round(result.supported / result.total, 4) if result.total else None
    return result


def markup_escape(text: str) -> str:
    """``text`` with every ``<`` that could open a tag written ``&lt;``: source and model text never becomes
    raw HTML in a Markdown document, whatever renders it later."""
    return _HTML_START.sub("&lt;", text)


def _markup_strip(line: str) -> str:
    """``line`` without the markup the model wrote (``_MARKUP``); a line without any is returned as it is.

    The sources are Markdown or text, so markup states nothing; left in, a ``<p>`` at the start of a
    line opens a raw HTML block that runs to the end of the document, and the run page showed the
    Sources heading and the footnotes as one paragraph. What still looks like the start of a tag
    after this is escaped once the document is assembled (``ground_markdown``).
    """
    cleaned = line
    for pattern in _MARKUP:
        cleaned = pattern.sub(" ", cleaned)
    if cleaned == line:
        return line
    return line[: len(line) - len(line.lstrip())] + " ".join(cleaned.split())


def _is_claim(sentence: str) -> bool:
    """Whether a sentence (citation markers and markup removed) states something.

    One with no content word (what is left of a ``<<topic>>`` placeholder) or a bare label ending in
    ":" (``Feature release:``) does not: a passage may well share its words, but there is nothing it
    could support, so it is neither kept nor counted as a sentence written.
    """
    return bool(content_words(sentence)) and not sentence.endswith(":")


def _claims(line: str) -> list[Sentence]:
    """The sentences of a prose line (list marker left out) that state something."""
    prefix = _LIST_PREFIX.match(line)
    return [s for s in split_sentences(line[prefix.end() :] if prefix else line) if _is_claim(s.text)]


def _as_written(sentence: Sentence) -> str:
    """The sentence as ``grounding.ground`` reads it: its text, then the ids it cited."""
    return sentence.text + "".join(f"[{label}]" for label in sentence.cited)


def _ground_prose(
    grounder: Grounder, line: str, claims: list[Sentence], seen: set[str], result: Grounded
) -> str | None:
    """The line (with its list marker) holding the sentences a passage supports; None when none is left.

    Adds each sentence not seen before to ``result``'s counts and audit; a repeat is skipped.
    """
    kept: list[str] = []
    for sentence in claims:
        if sentence.text.lower() in seen:
            continue
        seen.add(sentence.text.lower())
        grounded = grounder.ground(_as_written(sentence))
        if grounded.refused:  # the refusal phrase: its text would be REFUSAL, not a sentence of the document
            continue
        result.total, result.supported = result.total + grounded.total, result.supported + grounded.supported
        result.sentences += grounded.sentences
        result.invalid_citations += grounded.invalid_citations
        if grounded.text:
            kept.append(grounded.text)
    prefix = _LIST_PREFIX.match(line)
    return (prefix.group(1) if prefix else "") + " ".join(kept) if kept else None


def _is_table_rule(line: str) -> bool:
    stripped = line.strip()
    return stripped.startswith("|") and "-" in stripped and set(stripped) <= set("|-: ")


def _table_body_rows(lines: list[str]) -> set[int]:
    """Indices of the rows under a table's header and |---| rule: they state facts like sentences do."""
    rows: set[int] = set()
    for i in range(1, len(lines)):
        if _is_table_rule(lines[i]) and lines[i - 1].lstrip().startswith("|"):
            j = i + 1
            while j < len(lines) and lines[j].lstrip().startswith("|") and not _is_table_rule(lines[j]):
                rows.add(j)
                j += 1
    return rows


def _ground_row(grounder: Grounder, line: str, seen: set[str], result: Grounded) -> str | None:
    """A table row stays only if its cells, read as one statement, are supported by a passage.

    Without this a model could put any value, or an injected "source", in a table and
    it would reach the document unchecked. Returns the row with its [S#] marker, or None when
    dropped; a row counts as one sentence in ``result``, a repeated row or one that states nothing
    (``_is_claim``) not at all.
    """
    cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
    claim = "; ".join(cell for cell in cells if _MARKER.sub("", cell).strip())
    statement = _MARKER.sub("", claim).strip()
    if not _is_claim(statement) or statement.lower() in seen:
        return None
    seen.add(statement.lower())
    grounded = grounder.ground(claim.replace(". ", "; "))  # one statement, not one sentence per cell
    cited = list(dict.fromkeys(c for s in grounded.sentences for c in s.cited))
    verdict = Sentence(statement, cited, support=min((s.support for s in grounded.sentences), default=0.0))
    result.total += 1
    result.sentences.append(verdict)
    if grounded.refused or not grounded.total or grounded.supported < grounded.total:
        return None
    verdict.supported_by = ", ".join(grounded.cited_ids)
    result.supported += 1
    cells = [_MARKER.sub("", cell).strip() for cell in cells]
    cells[-1] = f"{cells[-1]} " + " ".join(f"[{label}]" for label in grounded.cited_ids)
    return "| " + " | ".join(cells) + " |"


def _is_prose(line: str) -> bool:
    stripped = line.strip()
    return bool(stripped) and not stripped.startswith(("#", "|", "```")) and not set(stripped) <= set("-*_=: ")


def _drop_empty_sections(lines: list[str]) -> str:
    """Remove headings left with no content before the next heading of the same or higher level."""
    keep: list[str] = []
    for i, line in enumerate(lines):
        if line.lstrip().startswith("#"):
            level = len(line.lstrip()) - len(line.lstrip().lstrip("#"))
            rest = [later for later in lines[i + 1 :] if later.strip()]
            nxt = rest[0].lstrip() if rest else ""
            nxt_level = len(nxt) - len(nxt.lstrip("#")) if nxt.startswith("#") else 0
            if not rest or (nxt_level and nxt_level <= level):
                continue
        keep.append(line)
    return re.sub(r"\n{3,}", "\n\n", "\n".join(keep)).strip()


def footnotes_render(body: str, included: list[Candidate] | dict[str, str], *, title: str) -> str:
    """Replace [S#] markers by [^N] in order of first use and append the source list.

    ``included``: the passages given to the model, or their footnote texts by label.
    """
    by_label = included if isinstance(included, dict) else {c.label: footnote_text(c) for c in included}
    numbers: dict[str, int] = {}

    def number(match: re.Match) -> str:
        label = match.group(1)
        if label not in by_label:
            return ""
        numbers.setdefault(label, len(numbers) + 1)
        return f"[^{numbers[label]}]"

    text = _MARKER.sub(number, body)
    notes = [f"[^{n}]: {markup_escape(by_label[label])}" for label, n in numbers.items()]
    heading = "" if text.lstrip().startswith("# ") else f"# {title}\n\n"
    return f"{heading}{text}\n\n## Sources\n\n" + "\n".join(notes) + "\n"


def low_coverage_note(document: str, *, kept: int, total: int) -> str:
    """The document with a low-confidence note under its title: most of what the model wrote is not in it."""
    title, _, rest = document.lstrip().partition("\n")
    note = (
        f"> **Low confidence — limited source coverage:** {kept} of the {total} sentences the model wrote "
        "are supported by the sources and kept; the others were removed. Check the sources before relying "
        "on this document."
    )
    return f"{title}\n\n{note}\n{rest}"


def footnote_text(candidate: Candidate) -> str:
    """The footnote of a chunk (``footnote_format``)."""
    chunk = candidate.chunk
    return footnote_format(
        name=chunk.source.name,
        kind=chunk.kind,
        heading=chunk.heading,
        page_start=chunk.page_start,
        page_end=chunk.page_end,
        lines=(chunk.line_start, chunk.line_end),
        ocr_confidence=chunk.ocr_confidence,
    )


def footnote_format(
    *,
    name: str,
    kind: str,
    heading: str,
    page_start: int | None,
    page_end: int | None,
    lines: tuple[int, int],
    ocr_confidence: float | None,
) -> str:
    """``datasheet.pdf §3.2 Power, p. 7, lines 4-15`` (the section by its own heading), then the
    rest of the location in its kind's terms (``location_text``): ``deck.pptx §Agenda, slide 3, lines 2-4``,
    ``pumps.xlsx, sheet Pumps, rows 20-45``, ``scan.png, lines 1-4, OCR, confidence 91 %``."""
    sheet = kind == Source.Kind.XLSX  # the sheet is part of the location, not a section
    section = f" §{_own_heading(heading)}" if heading and not sheet else ""
    where = location_text(
        kind=kind,
        heading=heading if sheet else "",
        page_start=page_start,
        page_end=page_end,
        line_start=lines[0],
        line_end=lines[1],
        ocr_confidence=ocr_confidence,
    )
    return f"{name}{section}, {where}"


def _own_heading(heading: str) -> str:
    """The last part of a heading path; a JSON list index stays with its key (``interfaces[0]``, not ``[0]``)."""
    parts = heading.split(" > ")
    name = parts.pop()
    while name.startswith("[") and parts:
        name = parts.pop() + name
    return name


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` via a temp file in the same folder and a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600; a document is a file like any the user writes
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    mask = os.umask(0)  # the only way to read it is to set it; put it back at once
    os.umask(mask)
    return mask
