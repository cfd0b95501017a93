"""Ingest: a folder (or one file) becomes sources, chunks, FTS rows and vectors.

Guarantees:
- idempotent: a file whose sha256, embedding model and status are unchanged is
  skipped; a changed file is replaced; a file gone from the folder is removed
  with its chunks and vectors;
- atomic per source: chunks, FTS rows (by trigger), vectors and the summary of
  one source are written in one short transaction after all slow work (parsing,
  LLM calls, embedding) is done, so a source is either fully there or not at all;
- a bad file is reported with its reason and never stops the run.
"""
from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone as dt_timezone
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from foundry_site import llm
from sources.models import Chunk, Collection, Source, SourceSummary
from sources.services import enrich
from sources.services.chunking import ChunkDraft, chunk_blocks
from sources.services.extract import ExtractionError, extract, kind_of
from sources import vectorstore

logger = logging.getLogger(__name__)

PRIVATE_DIR = "private"
DEFAULT_COLLECTION = "default"


@dataclass
class FileResult:
    path: str
    status: str  # ingested | unchanged | skipped | failed | removed
    reason: str = ""
    chunks: int = 0


@dataclass
class IngestReport:
    files: list[FileResult] = field(default_factory=list)

    def count(self, status: str) -> int:
        return sum(1 for f in self.files if f.status == status)

    def as_dict(self) -> dict:
        return {
            "ingested": self.count("ingested"),
            "unchanged": self.count("unchanged"),
            "skipped": self.count("skipped"),
            "failed": self.count("failed"),
            "removed": self.count("removed"),
            "chunks": sum(f.chunks for f in self.files if f.status == "ingested"),
            "files": [asdict(f) for f in self.files],
        }


@dataclass(frozen=True)
class Candidate:
    root: Path
    rel: str
    skip_reason: str = ""


ProgressFn = Callable[[FileResult], None]


def collection_get_or_create(*, name: str) -> Collection:
    collection, _ = Collection.objects.get_or_create(name=name)
    return collection


def scan(target: Path, *, include_private: bool, max_file_mb: float) -> tuple[Path, list[Candidate]]:
    """List the files under ``target`` (or ``target`` itself) with a skip reason where one applies.

    Symbolic links are never followed: a link could point outside the knowledge
    base or into a loop.
    """
    target = Path(os.path.abspath(target))
    if not target.exists():
        raise FileNotFoundError(f"{target}: no such file or folder")
    if target.is_file():
        root, files = target.parent, [target]
    else:
        root = target
        files = []
        for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
            dirnames.sort()
            files.extend(Path(dirpath) / name for name in sorted(filenames))
    limit = int(max_file_mb * 1024 * 1024)
    candidates = [Candidate(root, p.relative_to(root).as_posix(), _skip_reason(root, p, include_private, limit))
                  for p in files]
    return root, candidates


def _skip_reason(root: Path, path: Path, include_private: bool, limit: int) -> str:
    rel_parts = path.relative_to(root).parts
    if any(part.startswith(".") for part in rel_parts):
        return "hidden file"
    if not include_private and PRIVATE_DIR in rel_parts[:-1]:
        return "in private/ (use --include-private)"
    if path.is_symlink():
        return "symbolic link (not followed)"
    if kind_of(path) is None:
        return f"unsupported file type {path.suffix or '(none)'!r}"
    if any(ord(ch) < 32 for ch in path.name):
        return "file name contains control characters"
    size = path.stat().st_size
    if size > limit:
        return f"larger than ingest.max_file_mb ({size / 1048576:.1f} MB > {limit / 1048576:g} MB)"
    return ""


def knowledge_base_ingest(*, target: Path, collection: str = DEFAULT_COLLECTION, include_private: bool | None = None,
                          progress: ProgressFn | None = None) -> IngestReport:
    """Ingest every file under ``target`` and remove sources whose file is gone."""
    conf = settings.FOUNDRY.ingest
    include_private = conf.include_private if include_private is None else include_private
    root, candidates = scan(target, include_private=include_private, max_file_mb=conf.max_file_mb)
    coll = collection_get_or_create(name=collection)
    report = IngestReport()
    from sources.tasks import ingest_source  # tasks import services; imported here to keep that direction

    for cand in candidates:
        if cand.skip_reason:
            result = FileResult(cand.rel, "skipped", cand.skip_reason)
        else:
            result = FileResult(**ingest_source.delay(str(cand.root), cand.rel, coll.pk).get())
        report.files.append(result)
        if progress:
            progress(result)
    if Path(os.path.abspath(target)).is_dir():
        seen = {c.rel for c in candidates if not c.skip_reason}
        for gone in Source.objects.filter(root=str(root)).exclude(path__in=seen).order_by("path"):
            source_delete(source_id=gone.pk)
            result = FileResult(gone.path, "removed", "file no longer in the folder")
            report.files.append(result)
            if progress:
                progress(result)
    return report


def source_ingest(*, root: str, rel: str, collection_id: int) -> FileResult:
    """Ingest one file. Safe to run twice: the second run reports it unchanged."""
    path = Path(root) / rel
    conf = settings.FOUNDRY
    try:
        data = path.read_bytes()
    except OSError as exc:
        return _failed(root, rel, collection_id, f"cannot read file: {exc.strerror or exc}")
    digest = hashlib.sha256(data).hexdigest()
    existing = Source.objects.filter(root=root, path=rel).first()
    model = conf.embedding.model
    if (existing and existing.sha256 == digest and existing.status == Source.Status.INGESTED
            and existing.embedding_model == model and existing.collection_id == collection_id
            and vectorstore.table_exists(model)
            and vectorstore.source_index_complete(existing.pk, existing.chunk_count, model)):
        return FileResult(rel, "unchanged", "", existing.chunk_count)
    try:
        prepared = _prepare(path, data)
    except (ExtractionError, llm.LLMError) as exc:
        return _failed(root, rel, collection_id, str(exc), digest=digest, size=len(data))
    except Exception as exc:  # a parser bug on one hostile file must not stop the run: record it and go on
        logger.exception("unexpected error while preparing %s", rel)
        return _failed(root, rel, collection_id, f"unexpected error while reading the file: {type(exc).__name__}: "
                       f"{exc}", digest=digest, size=len(data))
    source = _store(root=root, rel=rel, collection_id=collection_id, digest=digest, data_size=len(data),
                    mtime=path.stat().st_mtime, prepared=prepared)
    logger.info("ingested source=%s chunks=%s", source.pk, source.chunk_count)
    return FileResult(rel, "ingested", "", source.chunk_count)


@dataclass
class _Prepared:
    title: str
    kind: str
    drafts: list[ChunkDraft]
    contexts: list[str]
    vectors: list[list[float]]
    summary: llm.Completion | None


def _prepare(path: Path, data: bytes) -> _Prepared:
    """All slow work for one file, outside any transaction."""
    conf = settings.FOUNDRY
    extracted = extract(path, data)
    sizing = enrich.ChunkSizing.for_model(conf.embedding.model, conf.ingest.chunk_tokens)
    drafts = chunk_blocks(extracted.blocks, max_tokens=sizing.max_chunk_tokens, count=sizing.count)
    if not drafts:
        raise ExtractionError("no text found in the file")
    document_text = "\n\n".join(d.text for d in drafts)
    prefixes = enrich.context_prefixes(title=extracted.title, document=document_text, drafts=drafts)
    contexts = [sizing.context_for(extracted.title, d, p) for d, p in zip(drafts, prefixes)]
    vectors = llm.embed([f"{c}\n\n{d.text}" if c else d.text for c, d in zip(contexts, drafts)],
                        model=conf.embedding.model, batch_size=conf.embedding.batch_size)
    summary = enrich.source_summary(title=extracted.title, document=document_text)
    return _Prepared(extracted.title, kind_of(path) or "", drafts, contexts, vectors, summary)


def _store(*, root: str, rel: str, collection_id: int, digest: str, data_size: int, mtime: float,
           prepared: _Prepared) -> Source:
    """Replace the source's chunks, vectors and summary in one transaction."""
    model = settings.FOUNDRY.embedding.model
    now = timezone.now()
    with transaction.atomic():
        vectorstore.ensure_table(model, len(prepared.vectors[0]))
        source, _ = Source.objects.get_or_create(root=root, path=rel, defaults={"collection_id": collection_id})
        old_ids = list(source.chunks.values_list("id", flat=True))
        vectorstore.vectors_delete(old_ids)
        source.chunks.all().delete()
        chunks = Chunk.objects.bulk_create([
            Chunk(source=source, ordinal=i, text=d.text, heading=" > ".join(d.heading),
                  page_start=d.page_start, page_end=d.page_end, line_start=d.line_start, line_end=d.line_end,
                  token_count=d.token_count, context=ctx, created_at=now)
            for i, (d, ctx) in enumerate(zip(prepared.drafts, prepared.contexts))
        ])
        vectorstore.vectors_insert(model, [(c.pk, collection_id, v) for c, v in zip(chunks, prepared.vectors)])
        SourceSummary.objects.filter(source=source).delete()
        if prepared.summary is not None:
            SourceSummary.objects.create(source=source, text=prepared.summary.text, model=prepared.summary.model)
        Source.objects.filter(pk=source.pk).update(
            collection_id=collection_id, title=prepared.title[:500], kind=prepared.kind, sha256=digest,
            size=data_size, mtime=datetime.fromtimestamp(mtime, tz=dt_timezone.utc), status=Source.Status.INGESTED,
            reason="", chunk_count=len(chunks), embedding_model=model, updated_at=now, ingested_at=now)
        source.refresh_from_db()
    return source


def _failed(root: str, rel: str, collection_id: int, reason: str, *, digest: str = "", size: int = 0) -> FileResult:
    """Record a failure. A previously ingested version stays searchable, and the reason says so."""
    now = timezone.now()
    with transaction.atomic():
        source, created = Source.objects.get_or_create(
            root=root, path=rel, defaults={"collection_id": collection_id, "kind": kind_of(Path(rel)) or ""})
        kept = source.chunk_count if not created else 0
        note = f"{reason} (the previously ingested version stays indexed)" if kept else reason
        Source.objects.filter(pk=source.pk).update(status=Source.Status.FAILED, reason=note, updated_at=now,
                                                   sha256=digest or source.sha256, size=size or source.size)
    logger.warning("ingest failed source=%s", source.pk)
    return FileResult(rel, "failed", reason, 0)


def source_delete(*, source_id: int) -> None:
    """Remove a source with its chunks, FTS rows, vectors and summary, in one transaction."""
    with transaction.atomic():
        ids = list(Chunk.objects.filter(source_id=source_id).values_list("id", flat=True))
        vectorstore.vectors_delete(ids)
        Source.objects.filter(pk=source_id).delete()
