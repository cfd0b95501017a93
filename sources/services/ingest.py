"""Ingest: a folder (or one file) becomes sources, chunks, FTS rows and vectors.

Guarantees:
- idempotent: a file whose sha256, embedding model, chunking settings and status
  are unchanged is skipped; a changed file, or one chunked with other settings
  (``chunking_settings``), is replaced; a file gone from the folder is removed
  with its chunks and vectors;
- atomic per source: chunks, FTS rows (by trigger), vectors and the summary of
  one source are written in one short transaction after all slow work (parsing,
  LLM calls, embedding) is done, so a source is either fully there or not at all;
- a bad file is reported with its reason and never stops the run;
- split for scale-out: ``source_prepare`` does the slow, pure work and never opens
  the database (it runs on ``compute`` workers anywhere); ``source_store_prepared``
  writes its payload (on the ``db`` worker next to the SQLite file).
"""
from __future__ import annotations

import base64
import hashlib
import logging
import os
import stat
import struct
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone as dt_timezone
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from foundry_site.core import llm
from sources.models import Chunk, Collection, Source, SourceSummary, cited_names
from sources.services import collections, enrich
from sources.services.chunking_settings import chunking_configured, chunking_of, rechunk_reason
from sources.services.chunking import ChunkDraft, chunk_blocks, chunk_windows
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


class CollectionMoveRefused(ValueError):
    """Ingesting would move sources out of the collection they are in; the message names them."""


@dataclass(frozen=True)
class Candidate:
    root: Path
    rel: str
    skip_reason: str = ""


ProgressFn = Callable[[FileResult], None]


def collection_get_or_create(*, name: str) -> Collection:
    collection = Collection.objects.filter(name=name).first()
    if collection is None:
        collections.collection_name_check(name)
        collection = Collection.objects.create(name=name)
    return collection


def collection_moves_check(*, root: Path, rels: list[str], collection: Collection) -> None:
    """Refuse an ingest that would move sources out of another collection.

    A source is one file under one root, in one collection; ingesting the same
    files into another collection moves them, and with them who may read them.
    That has to be asked for (``move=True``, ``foundry ingest --move``).
    """
    wanted = set(rels)
    elsewhere: dict[str, list[str]] = {}
    for path, name in (Source.objects.filter(root=str(root)).exclude(collection=collection)
                       .values_list("path", "collection__name").order_by("path").iterator()):
        if path in wanted:
            elsewhere.setdefault(name, []).append(path)
    if elsewhere:
        where = "; ".join(f"{len(paths)} in collection {name!r} (e.g. {paths[0]})" for name, paths in elsewhere.items())
        raise CollectionMoveRefused(
            f"{root}: files already ingested into another collection: {where}. Ingesting them into "
            f"{collection.name!r} would move them out of it and change who can read them; ingest into that "
            f"collection, or add --move to move them")


def scan(target: Path, *, include_private: bool, max_file_mb: float) -> tuple[Path, list[Candidate]]:
    """List the files under ``target`` (or ``target`` itself) with a skip reason where one applies.

    Symbolic links are never followed (a link could point outside the knowledge
    base or into a loop); each one is listed with a reason that says where it
    points. A file that disappears while the folder is scanned is listed as skipped.
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
            # os.walk does not descend into linked folders; list them so the report says why.
            links = [name for name in dirnames if os.path.islink(os.path.join(dirpath, name))]
            files.extend(Path(dirpath) / name for name in sorted([*filenames, *links]))
    limit = int(max_file_mb * 1024 * 1024)
    candidates = []
    for path in files:
        rel = path.relative_to(root).as_posix()
        if not _utf8_ok(rel):
            # Undecodable bytes cannot be stored as text: keep a readable, escaped name.
            rel = os.fsencode(rel).decode("utf-8", "backslashreplace")
            candidates.append(Candidate(root, rel, "file name is not valid UTF-8; rename the file"))
            continue
        candidates.append(Candidate(root, rel, _skip_reason(root, path, include_private, limit)))
    return root, candidates


def _utf8_ok(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _skip_reason(root: Path, path: Path, include_private: bool, limit: int) -> str:
    rel_parts = path.relative_to(root).parts
    if any(part.startswith(".") for part in rel_parts):
        return "hidden file"
    if not include_private and PRIVATE_DIR in rel_parts[:-1]:
        return "in private/ (use --include-private)"
    if path.is_symlink():
        return _symlink_reason(root, path)
    if kind_of(path) is None:
        return f"unsupported file type {path.suffix or '(none)'!r}"
    try:
        info = path.lstat()
    except FileNotFoundError:
        return "file vanished while the folder was scanned"
    if not stat.S_ISREG(info.st_mode):
        return "not a regular file (a pipe, socket or device)"
    if info.st_size > limit:
        return f"larger than ingest.max_file_mb ({info.st_size / 1048576:.1f} MB > {limit / 1048576:g} MB)"
    return ""


def _symlink_reason(root: Path, path: Path) -> str:
    """Why a symbolic link is skipped, naming where it leads (never followed for reading)."""
    try:
        target = path.resolve(strict=True)
    except FileNotFoundError:
        return "symbolic link to a missing file (broken link; not followed)"
    except (RuntimeError, OSError):  # Python 3.11 raises RuntimeError for a loop, later versions OSError(ELOOP)
        return "symbolic link loop (not followed)"
    real_root = root.resolve()
    if target != real_root and real_root not in target.parents:
        return "symbolic link to a file outside the knowledge base (not followed)"
    inside = target.relative_to(real_root).as_posix() or "."
    return f"symbolic link to {inside} inside the knowledge base (not followed; the target counts under its own path)"


def knowledge_base_ingest(*, target: Path, collection: str = DEFAULT_COLLECTION, include_private: bool | None = None,
                          move: bool = False, progress: ProgressFn | None = None) -> IngestReport:
    """Ingest every file under ``target`` and remove sources whose file is gone; wait for the result.

    Runs as an ``IngestJob`` (see ``ingest_jobs``): in-process without a broker,
    on the workers with one. ``progress`` is called once per file result.
    """
    from sources.services import ingest_jobs  # the job layer builds on this module

    job = ingest_jobs.ingest_job_create(target=target, collection=collection, include_private=include_private,
                                        move=move)
    job = ingest_jobs.ingest_job_execute(job_id=job.pk, on_file=progress)
    return ingest_jobs.ingest_job_report(job)


def file_digest(path: Path) -> str:
    """sha256 of the file, read in blocks (files may be large)."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def source_unchanged(*, root: str, rel: str, collection_id: int, digest: str) -> Source | None:
    """The source, if it is already ingested from exactly these bytes with the configured model and chunking."""
    model = settings.FOUNDRY.embedding.model
    existing = Source.objects.filter(root=root, path=rel).first()
    if (existing and existing.sha256 == digest and existing.status == Source.Status.INGESTED
            and existing.embedding_model == model and existing.collection_id == collection_id
            and existing.chunking == chunking_configured()
            and vectorstore.table_exists(model)
            and vectorstore.source_index_complete(existing.pk, existing.chunk_count, model)):
        return existing
    return None


def source_ingest(*, root: str, rel: str, collection_id: int) -> FileResult:
    """Ingest one file in-process (prepare, then store). Safe to run twice: the second run reports it unchanged."""
    path = Path(root) / rel
    try:
        digest = file_digest(path)
    except OSError as exc:
        return source_mark_failed(root=root, rel=rel, collection_id=collection_id,
                                  reason=f"cannot read file: {exc.strerror or exc}")
    existing = source_unchanged(root=root, rel=rel, collection_id=collection_id, digest=digest)
    if existing:
        return FileResult(rel, "unchanged", "", existing.chunk_count)
    return source_store_prepared(root=root, rel=rel, collection_id=collection_id,
                                 payload=source_prepare(root=root, rel=rel))


# --------------------------------------------------------------------------- compute side (no database)

PAYLOAD_VERSION = 3  # 2: window vectors; 3: chunks carry ocr_confidence


@dataclass
class _Prepared:
    title: str
    kind: str
    drafts: list[ChunkDraft]
    contexts: list[str]
    vectors: list[list[float]]
    summary: llm.Completion | None
    chunking: str  # the settings the chunks were built with; "" from a payload of a worker that predates them
    window_owners: list[int]  # the chunk (index into drafts) of each window vector
    window_vectors: list[list[float]]
    notes: list[str] = field(default_factory=list)  # Extracted.notes: parts of the file left out, and why


def _prepare(path: Path, data: bytes) -> _Prepared:
    """All slow work for one file, outside any transaction."""
    conf = settings.FOUNDRY
    chunking = chunking_of(conf)
    extracted = extract(path, data)
    sizing = enrich.ChunkSizing.for_model(conf.embedding.model, conf.ingest.chunk_tokens)
    drafts = chunk_blocks(extracted.blocks, max_tokens=sizing.max_chunk_tokens, count=sizing.count,
                          overlap_tokens=conf.ingest.chunk_overlap_tokens)
    if not drafts:
        raise ExtractionError("no text found in the file")
    document_text = "\n\n".join(d.text for d in drafts)
    prefixes = enrich.context_prefixes(title=extracted.title, document=document_text, drafts=drafts)
    contexts = [sizing.context_for(extracted.title, d, p) for d, p in zip(drafts, prefixes)]
    # Each chunk, then each of its sentence windows, embedded with the chunk's context before it.
    texts = [_with_context(c, d.text) for c, d in zip(contexts, drafts)]
    owners = []
    for ordinal, draft in enumerate(drafts):
        for window in chunk_windows(draft.text, sentences=conf.ingest.window_sentences,
                                    limit=vectorstore.WINDOW_SLOTS - 1):
            owners.append(ordinal)
            texts.append(_with_context(contexts[ordinal], window))
    vectors = llm.embed(texts, model=conf.embedding.model, batch_size=conf.embedding.batch_size)
    summary = enrich.source_summary(title=extracted.title, drafts=drafts, chunk_vectors=vectors[:len(drafts)])
    return _Prepared(extracted.title, kind_of(path) or "", drafts, contexts, vectors[:len(drafts)], summary,
                     chunking, owners, vectors[len(drafts):], list(extracted.notes))


def _with_context(context: str, text: str) -> str:
    return f"{context}\n\n{text}" if context else text


def source_prepare(*, root: str, rel: str) -> dict[str, Any]:
    """All slow work for one file (extract, chunk, LLM enrichment, embed) as a JSON-serialisable payload.

    Never opens the database, so it can run on any machine that sees the file.
    A file that cannot be ingested gives a ``failed`` payload with its reason; a
    transient model error (``LLMError.transient``) is raised so the task can retry.
    """
    path = Path(root) / rel
    try:
        data, mtime = read_stable(path)
    except FileNotFoundError:
        return _failed_payload(rel, "file vanished during ingest (deleted or moved while being read)")
    except FileChanging as exc:
        return _failed_payload(rel, str(exc))
    except OSError as exc:
        return _failed_payload(rel, f"cannot read file: {exc.strerror or exc}")
    digest = hashlib.sha256(data).hexdigest()
    try:
        prepared = _prepare(path, data)
    except ExtractionError as exc:
        return _failed_payload(rel, str(exc), digest=digest, size=len(data))
    except llm.LLMError as exc:
        if exc.transient:
            raise
        return _failed_payload(rel, str(exc), digest=digest, size=len(data))
    except Exception as exc:  # a parser bug on one hostile file must not stop the run: record it and go on
        logger.exception("unexpected error while preparing %s", rel)
        return _failed_payload(rel, f"unexpected error while reading the file: {type(exc).__name__}: {exc}",
                               digest=digest, size=len(data))
    return _encode_payload(rel, prepared, digest=digest, size=len(data), mtime=mtime)


READ_ATTEMPTS = 3


class FileChanging(OSError):
    """The file kept changing while it was read; no consistent version could be taken."""


def read_bytes(path: Path) -> bytes:
    """The one place ingest reads a file's bytes (tests hook it to change a file mid-read)."""
    return path.read_bytes()


def read_stable(path: Path) -> tuple[bytes, float]:
    """The file's bytes and mtime, from a read during which the file did not change.

    A file written while it is read gives a torn mix of two versions; the size,
    mtime and inode before and after the read show that, and the read is
    repeated. After READ_ATTEMPTS torn reads it gives up with ``FileChanging``.
    """
    for _ in range(READ_ATTEMPTS):
        before = os.stat(path)
        data = read_bytes(path)
        after = os.stat(path)
        same = (before.st_size, before.st_mtime_ns, before.st_ino) == (after.st_size, after.st_mtime_ns, after.st_ino)
        if same and len(data) == after.st_size:
            return data, after.st_mtime
    raise FileChanging(f"file kept changing while it was read ({READ_ATTEMPTS} attempts); "
                       "run foundry ingest again once it is written")


def _failed_payload(rel: str, reason: str, *, digest: str = "", size: int = 0) -> dict[str, Any]:
    return {"v": PAYLOAD_VERSION, "status": "failed", "path": rel, "reason": reason, "sha256": digest, "size": size}


def _encode_payload(rel: str, prepared: _Prepared, *, digest: str, size: int, mtime: float) -> dict[str, Any]:
    """Vectors travel as base64 little-endian float32: exactly what vec0 stores, at a quarter of JSON's size."""
    dim = len(prepared.vectors[0])
    return {
        "v": PAYLOAD_VERSION, "status": "prepared", "path": rel, "sha256": digest, "size": size, "mtime": mtime,
        "title": prepared.title, "kind": prepared.kind, "model": settings.FOUNDRY.embedding.model,
        "chunks": [{**asdict(d), "heading": list(d.heading)} for d in prepared.drafts], "contexts": prepared.contexts,
        "dim": dim, "vectors": _vectors_encode(prepared.vectors),
        "summary": asdict(prepared.summary) if prepared.summary else None, "chunking": prepared.chunking,
        "window_owners": prepared.window_owners, "window_vectors": _vectors_encode(prepared.window_vectors),
        "notes": prepared.notes,
    }


def _vectors_encode(vectors: list[list[float]]) -> str:
    flat = [x for vector in vectors for x in vector]
    return base64.b64encode(struct.pack(f"<{len(flat)}f", *flat)).decode("ascii")


def _vectors_decode(data: str, dim: int) -> list[list[float]]:
    raw = base64.b64decode(data)
    flat = struct.unpack(f"<{len(raw) // 4}f", raw)
    return [list(flat[i:i + dim]) for i in range(0, len(flat), dim)]


def _decode_payload(payload: dict[str, Any]) -> _Prepared:
    vectors = _vectors_decode(payload["vectors"], payload["dim"])
    window_vectors = _vectors_decode(payload["window_vectors"], payload["dim"])
    drafts = [ChunkDraft(**{**c, "heading": tuple(c["heading"])}) for c in payload["chunks"]]
    summary = llm.Completion(**payload["summary"]) if payload["summary"] else None
    if len(payload["window_owners"]) != len(window_vectors):
        raise ValueError(f"payload has {len(window_vectors)} window vectors for {len(payload['window_owners'])} "
                         "windows")
    return _Prepared(payload["title"], payload["kind"], drafts, payload["contexts"], vectors, summary,
                     payload.get("chunking", ""), payload["window_owners"], window_vectors, payload.get("notes", []))


# --------------------------------------------------------------------------- database side

def source_store_prepared(*, root: str, rel: str, collection_id: int, payload: dict[str, Any]) -> FileResult:
    """Write a prepared payload (or its failure) for one file. Idempotent: the same bytes twice is ``unchanged``."""
    if payload["status"] == "failed":
        return source_mark_failed(root=root, rel=rel, collection_id=collection_id, reason=payload["reason"],
                                  digest=payload["sha256"], size=payload["size"])
    if payload.get("v") != PAYLOAD_VERSION:
        return source_mark_failed(
            root=root, rel=rel, collection_id=collection_id, digest=payload.get("sha256", ""),
            size=payload.get("size", 0),
            reason=f"prepared by a worker that writes payload version {payload.get('v')!r}, but this one reads "
                   f"{PAYLOAD_VERSION}; every worker must run the same Foundry release")
    model = settings.FOUNDRY.embedding.model
    if payload["model"] != model:
        return source_mark_failed(
            root=root, rel=rel, collection_id=collection_id, digest=payload["sha256"], size=payload["size"],
            reason=f"prepared with embedding model {payload['model']} but this knowledge base uses {model}; "
                   "every worker must read the same foundry.yaml")
    existing = source_unchanged(root=root, rel=rel, collection_id=collection_id, digest=payload["sha256"])
    if existing:
        return FileResult(rel, "unchanged", "", existing.chunk_count)
    prepared = _decode_payload(payload)
    previous = (Source.objects.filter(root=root, path=rel, status=Source.Status.INGESTED, sha256=payload["sha256"])
                .values_list("chunking", flat=True).first())
    reason = "; ".join(filter(None, [*prepared.notes, rechunk_reason(previous=previous, prepared=prepared.chunking,
                                                                     configured=chunking_configured())]))
    source = _store(root=root, rel=rel, collection_id=collection_id, digest=payload["sha256"],
                    data_size=payload["size"], mtime=payload["mtime"], prepared=prepared)
    logger.info("ingested source=%s chunks=%s", source.pk, source.chunk_count)
    return FileResult(rel, "ingested", reason, source.chunk_count)


def _store(*, root: str, rel: str, collection_id: int, digest: str, data_size: int, mtime: float,
           prepared: _Prepared) -> Source:
    """Replace the source's chunks, vectors and summary in one transaction."""
    model = settings.FOUNDRY.embedding.model
    now = timezone.now()
    with transaction.atomic():
        vectorstore.ensure_table(model, len(prepared.vectors[0]))
        vectorstore.ensure_windows_table(model, len(prepared.vectors[0]))
        source, created = Source.objects.get_or_create(root=root, path=rel, defaults={"collection_id": collection_id})
        if created:
            source_names_refresh(rel)
        old_ids = list(source.chunks.values_list("id", flat=True))
        vectorstore.vectors_delete(old_ids)
        source.chunks.all().delete()
        chunks = Chunk.objects.bulk_create([
            Chunk(source=source, ordinal=i, text=d.text, heading=" > ".join(d.heading),
                  page_start=d.page_start, page_end=d.page_end, line_start=d.line_start, line_end=d.line_end,
                  token_count=d.token_count, context=ctx, ocr_confidence=d.ocr_confidence, created_at=now)
            for i, (d, ctx) in enumerate(zip(prepared.drafts, prepared.contexts))
        ])
        vectorstore.vectors_insert(model, [(c.pk, collection_id, v) for c, v in zip(chunks, prepared.vectors)])
        vectorstore.windows_insert(model, _window_rows(chunks, prepared, collection_id))
        SourceSummary.objects.filter(source=source).delete()
        if prepared.summary is not None:
            SourceSummary.objects.create(source=source, text=prepared.summary.text, model=prepared.summary.model)
        Source.objects.filter(pk=source.pk).update(
            collection_id=collection_id, title=prepared.title[:500], kind=prepared.kind, sha256=digest,
            size=data_size, mtime=datetime.fromtimestamp(mtime, tz=dt_timezone.utc), status=Source.Status.INGESTED,
            reason="; ".join(prepared.notes), chunk_count=len(chunks), embedding_model=model, chunking=prepared.chunking,
            updated_at=now, ingested_at=now)
        source.refresh_from_db()
    return source


def _window_rows(chunks: list[Chunk], prepared: _Prepared,
                 collection_id: int) -> list[tuple[int, int, list[float]]]:
    """(window id, collection, vector) of each window: the n-th window of a chunk takes its n-th slot."""
    seen: dict[int, int] = {}
    rows = []
    for owner, vector in zip(prepared.window_owners, prepared.window_vectors):
        index = seen.get(owner, 0)
        seen[owner] = index + 1
        rows.append((vectorstore.window_id(chunks[owner].pk, index), collection_id, vector))
    return rows


def source_mark_failed(*, root: str, rel: str, collection_id: int, reason: str, digest: str = "",
                       size: int = 0) -> FileResult:
    """Record a failure. A previously ingested version stays searchable, and the reason says so."""
    now = timezone.now()
    with transaction.atomic():
        source, created = Source.objects.get_or_create(
            root=root, path=rel, defaults={"collection_id": collection_id, "kind": kind_of(Path(rel)) or ""})
        if created:
            source_names_refresh(rel)
        kept = source.chunk_count if not created else 0
        note = f"{reason} (the previously ingested version stays indexed)" if kept else reason
        Source.objects.filter(pk=source.pk).update(status=Source.Status.FAILED, reason=note, updated_at=now,
                                                   sha256=digest or source.sha256, size=size or source.size)
    logger.warning("ingest failed source=%s", source.pk)
    return FileResult(rel, "failed", reason, 0)


def source_names_refresh(path: str) -> None:
    """Name the sources at ``path`` as citations show them (``cited_names``), inside the caller's transaction."""
    pk_of = dict(Source.objects.filter(path=path).values_list("root", "pk"))
    for root, name in cited_names(path, list(pk_of)).items():
        Source.objects.filter(pk=pk_of[root]).exclude(name=name).update(name=name)


def source_delete(*, source_id: int) -> None:
    """Remove a source with its chunks, FTS rows, vectors and summary, in one transaction."""
    with transaction.atomic():
        ids = list(Chunk.objects.filter(source_id=source_id).values_list("id", flat=True))
        vectorstore.vectors_delete(ids)
        paths = list(Source.objects.filter(pk=source_id).values_list("path", flat=True))
        Source.objects.filter(pk=source_id).delete()
        for path in paths:
            source_names_refresh(path)
