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
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db.models import F
from django.utils import timezone

from foundry_site import llm, prompts
from foundry_site.text import TextRejected, user_text
from generation.context import chunk_budget, context_build, fence_escape
from generation.models import GenerationRun
from generation.support import Grounder
from retrieval.services.retrieve import Candidate, Retrieval, retrieve
from sources.models import SourceSummary
from sources.vectorstore import MissingEmbeddings

logger = logging.getLogger(__name__)

_LIST_PREFIX = re.compile(r"^(\s*(?:[-*+]|\d+[.)])\s+)")
_MARKER = re.compile(r"\[(S\d+)\]")


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


def document_prepare(*, topic: str, spec: SpecText, collection_ids: list[int] | None) -> Prepared:
    """Retrieval and the assembled system prompt; makes no generation call (used by --dry-run)."""
    conf = settings.FOUNDRY
    topic = topic_clean(topic)
    retrieval = retrieve(question=topic, collection_ids=collection_ids)
    if not retrieval.gate.passed or not retrieval.candidates:
        return Prepared(retrieval, [], "")
    summaries = _summaries(retrieval.candidates, conf.generation.max_source_summaries)
    frame = dict(feature_spec_content=spec.body, max_source_summaries=conf.generation.max_source_summaries,
                 source_summaries=summaries or "(none)")
    model = conf.generation.model
    overhead = llm.count_tokens(prompts.render("generate_system", retrieved_chunks="", **frame) + topic, model=model)
    budget = chunk_budget(model=model, configured=conf.generation.token_budget,
                          reserved=overhead + conf.generation.max_document_tokens)
    built = context_build(retrieval.candidates[:conf.generation.max_passages * 2], model=model, budget=budget)
    return Prepared(retrieval, built.included, prompts.render("generate_system", retrieved_chunks=built.text, **frame))


def _summaries(candidates: list[Candidate], limit: int) -> str:
    """Summaries of the retrieved chunks' sources, best-ranked source first, at most ``limit``."""
    order = list(dict.fromkeys(c.chunk.source_id for c in candidates))[:limit]
    found = {s.source_id: s for s in SourceSummary.objects.filter(source_id__in=order).select_related("source")}
    # Summaries are model output about document text, so they may carry its injections too.
    return "\n".join(fence_escape(f"- {found[sid].source.path}: {' '.join(found[sid].text.split())}")
                     for sid in order if sid in found)


def generation_run_create(*, topic: str, spec: SpecText, output_path: str | None = None, user: Any = None,
                          collection_ids: list[int] | None = None) -> GenerationRun:
    topic = topic_clean(topic)
    run = GenerationRun.objects.create(
        topic=topic, spec_name=spec.name, spec_version=spec.version, spec_body=spec.body,
        created_by=user if getattr(user, "is_authenticated", False) else None,
        collection_ids=collection_ids, output_path=output_path or "")
    if not output_path:
        run.output_path = str(settings.FOUNDRY_HOME / "outputs" / f"run-{run.pk}.md")
        GenerationRun.objects.filter(pk=run.pk).update(output_path=run.output_path)
    return run


def generation_run_execute(*, run_id: int) -> None:
    """Execute a pending run once; a run that is not pending (or gone) is left alone."""
    now = timezone.now()
    claimed = GenerationRun.objects.filter(pk=run_id, status=GenerationRun.Status.PENDING).update(
        status=GenerationRun.Status.RUNNING, started_at=now, heartbeat_at=now, stage="retrieval",
        attempts=F("attempts") + 1)
    if not claimed:
        return
    run = GenerationRun.objects.get(pk=run_id)
    started = time.perf_counter()
    fields: dict[str, Any] = {"timings": {}}
    with llm.record_calls() as calls:
        try:
            _execute(run, fields)
            status, error = GenerationRun.Status.SUCCEEDED, None
        except (GenerationError, llm.LLMError, MissingEmbeddings) as exc:
            status = GenerationRun.Status.FAILED
            error = {"type": type(exc).__name__, "message": str(exc),
                     "transient": bool(getattr(exc, "transient", False))}
    timings = {**fields.pop("timings", {}), "total": round((time.perf_counter() - started) * 1000, 1)}
    GenerationRun.objects.filter(pk=run_id).update(
        status=status, error=error, finished_at=timezone.now(), stage="done", timings=timings,
        llm_calls=calls.llm_calls, prompt_tokens=calls.prompt_tokens, completion_tokens=calls.completion_tokens,
        cost=round(calls.cost, 6), **fields)
    logger.info("generation run %s %s", run_id, status)


def _stage(run: GenerationRun, stage: str) -> None:
    GenerationRun.objects.filter(pk=run.pk).update(stage=stage, heartbeat_at=timezone.now())


def _execute(run: GenerationRun, fields: dict[str, Any]) -> None:
    """Run the pipeline, filling ``fields`` (stored on the run even when a step fails)."""
    conf = settings.FOUNDRY
    spec = SpecText(run.spec_name, run.spec_version, run.spec_body)
    prepared = document_prepare(topic=run.topic, spec=spec, collection_ids=run.collection_ids)
    r = prepared.retrieval
    fields.update({
        "gate": r.gate.as_dict(), "conflicts": [c.as_dict() for c in r.conflicts], "timings": dict(r.timings),
        "chunks": [{"chunk_id": c.chunk.pk, "label": c.label, "score": round(c.score, 4), "ranks": c.ranks}
                   for c in r.candidates],
        "models_used": {"generation": conf.generation.model, "embedding": conf.embedding.model}})
    if not prepared.included:
        raise GenerationError(f"No supporting documentation found in indexed sources ({r.gate.reason}); "
                              "no document was generated.")
    fields["prompt"] = prepared.system
    _stage(run, "generate")
    start = time.perf_counter()
    reply = llm.complete(messages=[{"role": "system", "content": prepared.system},
                                   {"role": "user", "content": f"Topic: {run.topic}"}],
                         purpose="generate", model=conf.generation.model,
                         max_tokens=conf.generation.max_document_tokens, temperature=conf.generation.temperature)
    fields["timings"]["generate"] = round((time.perf_counter() - start) * 1000, 1)
    _stage(run, "grounding")
    body, total, kept = ground_markdown(reply.text, prepared.included)
    fields.update(sentences_total=total, sentences_kept=kept, coverage=round(kept / total, 4) if total else None)
    if not kept:
        raise GenerationError("The grounding check removed every sentence the model wrote; no document was written.")
    write_atomic(Path(run.output_path), footnotes_render(body, prepared.included, title=run.topic))


def ground_markdown(text: str, included: list[Candidate]) -> tuple[str, int, int]:
    """Ground every prose line; headings and blank lines stay, unsupported sentences go.

    Returns (markdown with [S#] markers, sentences written, sentences kept).
    """
    grounder = Grounder(included)
    lines = text.splitlines()
    grounder.prime([line for line in lines if _is_prose(line)])
    out: list[str] = []
    total = kept = 0
    rows = _table_body_rows(lines)
    for i, line in enumerate(lines):
        if i in rows:
            row, n, ok = _ground_row(grounder, line)
            total, kept = total + n, kept + ok
            if row:
                out.append(row)
            continue
        if not _is_prose(line):
            out.append(line.rstrip())
            continue
        prefix = _LIST_PREFIX.match(line)
        grounded = grounder.ground(line[prefix.end():] if prefix else line)
        total, kept = total + grounded.total, kept + grounded.supported
        if grounded.text:
            out.append((prefix.group(1) if prefix else "") + grounded.text)
    return _drop_empty_sections(out), total, kept


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


def _ground_row(grounder: Grounder, line: str) -> tuple[str, int, int]:
    """A table row stays only if its cells, read as one statement, are supported by a passage.

    Without this a model could put any value, or an injected "source", in a table and
    it would reach the document unchecked. Returns (row with its [S#] marker or "", 1, 0|1).
    """
    cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
    claim = "; ".join(cell for cell in cells if _MARKER.sub("", cell).strip())
    grounded = grounder.ground(claim.replace(". ", "; "))  # one statement, not one sentence per cell
    if grounded.refused or not grounded.total or grounded.supported < grounded.total:
        return "", 1, 0
    cells = [_MARKER.sub("", cell).strip() for cell in cells]
    cells[-1] = f"{cells[-1]} " + " ".join(f"[{label}]" for label in grounded.cited_ids)
    return "| " + " | ".join(cells) + " |", 1, 1


def _is_prose(line: str) -> bool:
    stripped = line.strip()
    return bool(stripped) and not stripped.startswith(("#", "|", "```")) and not set(stripped) <= set("-*_=: ")


def _drop_empty_sections(lines: list[str]) -> str:
    """Remove headings left with no content before the next heading of the same or higher level."""
    keep: list[str] = []
    for i, line in enumerate(lines):
        if line.lstrip().startswith("#"):
            level = len(line.lstrip()) - len(line.lstrip().lstrip("#"))
            rest = [l for l in lines[i + 1:] if l.strip()]
            nxt = rest[0].lstrip() if rest else ""
            nxt_level = len(nxt) - len(nxt.lstrip("#")) if nxt.startswith("#") else 0
            if not rest or (nxt_level and nxt_level <= level):
                continue
        keep.append(line)
    return re.sub(r"\n{3,}", "\n\n", "\n".join(keep)).strip()


def footnotes_render(body: str, included: list[Candidate], *, title: str) -> str:
    """Replace [S#] markers by [^N] in order of first use and append the source list."""
    by_label = {c.label: c for c in included}
    numbers: dict[str, int] = {}

    def number(match: re.Match) -> str:
        label = match.group(1)
        if label not in by_label:
            return ""
        numbers.setdefault(label, len(numbers) + 1)
        return f"[^{numbers[label]}]"

    text = _MARKER.sub(number, body)
    notes = [f"[^{n}]: {footnote_text(by_label[label])}" for label, n in numbers.items()]
    heading = "" if text.lstrip().startswith("# ") else f"# {title}\n\n"
    return f"{heading}{text}\n\n## Sources\n\n" + "\n".join(notes) + "\n"


def footnote_text(candidate: Candidate) -> str:
    """``datasheet.pdf §3.2 Power, p. 7, lines 4-15`` (seed 000 style)."""
    chunk = candidate.chunk
    parts = [chunk.source.path + (f" §{chunk.heading.split(' > ')[-1]}" if chunk.heading else "")]
    if chunk.page_start:
        parts.append(f"p. {chunk.page_start}")
    parts.append(f"lines {chunk.line_start}-{chunk.line_end}")
    return ", ".join(parts)


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` via a temp file in the same folder and a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
