"""Ingest, compute side: list a folder's files and turn one file into a payload, never opening the database.

``scan`` lists the files under a folder with a skip reason where one applies. ``source_prepare``
does all slow work for one file (read it while it holds still, extract, chunk, the optional LLM
context prefixes and summary, embed) and returns a JSON payload: it runs on ``compute`` workers
anywhere. ``sources.services.ingest`` writes the payload on the database side.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import os
import stat
import struct
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings

from core import llm
from sources import vectorstore
from sources.services import enrich
from sources.services.chunking import ChunkDraft, chunk_blocks, chunk_windows
from sources.services.chunking_settings import chunking_of
from sources.services.extract import ExtractionError, extract, kind_of

logger = logging.getLogger(__name__)


PRIVATE_DIR = "private"


@dataclass(frozen=True)
class Candidate:
    root: Path
    rel: str
    skip_reason: str = ""


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


def file_digest(path: Path) -> str:
    """sha256 of the file, read in blocks (files may be large)."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


PAYLOAD_VERSION = 4  # 2: window vectors; 3: chunks carry ocr_confidence; 4: the date the document gives itself


@dataclass
class Prepared:
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
    issued: str | None = None  # Extracted.issued as ISO 8601


def _prepare(path: Path, data: bytes) -> Prepared:
    """All slow work for one file, outside any transaction."""
    conf = settings.FOUNDRY
    chunking = chunking_of(conf)
    extracted = extract(path, data)
    sizing = enrich.ChunkSizing.for_model(conf.embedding.model, conf.ingest.chunk_tokens)
    drafts = chunk_blocks(
        extracted.blocks,
        max_tokens=sizing.max_chunk_tokens,
        count=sizing.count,
        overlap_tokens=conf.ingest.chunk_overlap_tokens,
    )
    if not drafts:
        raise ExtractionError("no text found in the file")
    document_text = "\n\n".join(d.text for d in drafts)
    prefixes = enrich.context_prefixes(title=extracted.title, document=document_text, drafts=drafts)
    contexts = [sizing.context_for(extracted.title, d, p) for d, p in zip(drafts, prefixes)]
    # Each chunk, then each of its sentence windows, embedded with the chunk's context before it.
    texts = [with_context(c, d.text) for c, d in zip(contexts, drafts)]
    owners = []
    for ordinal, draft in enumerate(drafts):
        for window in chunk_windows(
            draft.text, sentences=conf.ingest.window_sentences, limit=vectorstore.WINDOW_SLOTS - 1
        ):
            owners.append(ordinal)
            texts.append(with_context(contexts[ordinal], window))
    vectors = llm.embed(texts, model=conf.embedding.model, batch_size=conf.embedding.batch_size)
    summary = enrich.source_summary(title=extracted.title, drafts=drafts, chunk_vectors=vectors[: len(drafts)])
    return Prepared(
        extracted.title,
        kind_of(path) or "",
        drafts,
        contexts,
        vectors[: len(drafts)],
        summary,
        chunking,
        owners,
        vectors[len(drafts) :],
        list(extracted.notes),
        extracted.issued.isoformat() if extracted.issued else None,
    )


def with_context(context: str, text: str) -> str:
    """The text a chunk or one of its windows is embedded from: its context, then the text."""
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
        return _failed_payload(
            rel, f"unexpected error while reading the file: {type(exc).__name__}: {exc}", digest=digest, size=len(data)
        )
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
    raise FileChanging(
        f"file kept changing while it was read ({READ_ATTEMPTS} attempts); run foundry ingest again once it is written"
    )


def _failed_payload(rel: str, reason: str, *, digest: str = "", size: int = 0) -> dict[str, Any]:
    return {"v": PAYLOAD_VERSION, "status": "failed", "path": rel, "reason": reason, "sha256": digest, "size": size}


def _encode_payload(rel: str, prepared: Prepared, *, digest: str, size: int, mtime: float) -> dict[str, Any]:
    """Vectors travel as base64 little-endian float32: exactly what vec0 stores, at a quarter of JSON's size."""
    dim = len(prepared.vectors[0])
    return {
        "v": PAYLOAD_VERSION,
        "status": "prepared",
        "path": rel,
        "sha256": digest,
        "size": size,
        "mtime": mtime,
        "title": prepared.title,
        "kind": prepared.kind,
        "model": settings.FOUNDRY.embedding.model,
        "chunks": [{**asdict(d), "heading": list(d.heading)} for d in prepared.drafts],
        "contexts": prepared.contexts,
        "dim": dim,
        "vectors": _vectors_encode(prepared.vectors),
        "summary": asdict(prepared.summary) if prepared.summary else None,
        "chunking": prepared.chunking,
        "window_owners": prepared.window_owners,
        "window_vectors": _vectors_encode(prepared.window_vectors),
        "notes": prepared.notes,
        "issued": prepared.issued,
    }


def _vectors_encode(vectors: list[list[float]]) -> str:
    flat = [x for vector in vectors for x in vector]
    return base64.b64encode(struct.pack(f"<{len(flat)}f", *flat)).decode("ascii")


def _vectors_decode(data: str, dim: int) -> list[list[float]]:
    raw = base64.b64decode(data)
    flat = struct.unpack(f"<{len(raw) // 4}f", raw)
    return [list(flat[i : i + dim]) for i in range(0, len(flat), dim)]


def payload_decode(payload: dict[str, Any]) -> Prepared:
    vectors = _vectors_decode(payload["vectors"], payload["dim"])
    window_vectors = _vectors_decode(payload["window_vectors"], payload["dim"])
    drafts = [ChunkDraft(**{**c, "heading": tuple(c["heading"])}) for c in payload["chunks"]]
    summary = llm.Completion(**payload["summary"]) if payload["summary"] else None
    if len(payload["window_owners"]) != len(window_vectors):
        raise ValueError(
            f"payload has {len(window_vectors)} window vectors for {len(payload['window_owners'])} windows"
        )
    return Prepared(
        payload["title"],
        payload["kind"],
        drafts,
        payload["contexts"],
        vectors,
        summary,
        payload.get("chunking", ""),
        payload["window_owners"],
        window_vectors,
        payload.get("notes", []),
        payload["issued"],
    )
