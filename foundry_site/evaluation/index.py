"""Eval indexes: a document set ingested once into its own database, through the normal ingest pipeline: a SQLite
file under ``FOUNDRY_HOME/eval-cache/<name>-<key>/``, or, with ``FOUNDRY_DATABASE_URL`` set, a database of its own
on that PostgreSQL server (``<database>_eval_<hash of the key and the folder>``), so an eval measures the store
the install uses.

The key covers the data, the embedding model, the chunk size and overlap, the
sentence windows and the contextual-prefix model (``embedding.context_model``,
when set), so a second
run with the same inputs finds every file ``unchanged`` and embeds nothing;
an interrupted build resumes where it stopped (ingest is idempotent per file).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.test.utils import override_settings

from django.db import connection

from foundry_site.db.switch import database_use, postgresql_database_use
from foundry_site.evaluation.beir import Document
from sources.models import Chunk
from sources.services.ingest import IngestReport, ProgressFn
from sources.services.ingest_jobs import knowledge_base_ingest

FORMAT_VERSION = 1  # bump when documents_write changes what it writes
EVAL_COLLECTION = "eval"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass
class EvalIndex:
    folder: Path
    database: str  # the SQLite file's path, or the PostgreSQL database's name
    ingest: IngestReport
    doc_of_chunk: dict[int, str]  # chunk id -> document id


def cache_key(*, data_sha256: str, extra: dict | None = None) -> str:
    """Key of an eval index: data hash + embedding model + chunk size + context model + format version."""
    conf = settings.FOUNDRY
    material = {
        "data": data_sha256,
        "model": conf.embedding.model,
        "chunk_tokens": conf.ingest.chunk_tokens,
        "format": FORMAT_VERSION,
        **(extra or {}),
    }
    # Options added later enter the key only when set, so existing indexes keep their keys.
    if conf.embedding.context_model != "none":
        material["context_model"] = conf.embedding.context_model
    if conf.ingest.chunk_overlap_tokens:
        material["chunk_overlap_tokens"] = conf.ingest.chunk_overlap_tokens
    if conf.ingest.window_sentences:
        material["window_sentences"] = conf.ingest.window_sentences
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()


def document_markdown(doc: Document) -> str:
    """``# title`` then the text; a text line starting with '#' is indented so it stays text."""
    title = " ".join(doc.title.split())
    body = "\n".join(" " + line if line.lstrip().startswith("#") else line for line in doc.text.splitlines())
    return f"# {title}\n\n{body.strip()}\n" if title else f"{body.strip()}\n"


def file_name(doc_id: str) -> str:
    safe = _UNSAFE.sub("_", doc_id).strip("._") or "doc"
    if safe != doc_id:
        safe += "-" + hashlib.sha256(doc_id.encode()).hexdigest()[:8]
    return f"{safe[:120]}.md"


def documents_write(folder: Path, documents: Iterable[Document]) -> dict[str, str]:
    """Write one Markdown file per document (only when its content changed); returns file name -> doc id."""
    folder.mkdir(parents=True, exist_ok=True)
    names: dict[str, str] = {}
    for doc in documents:
        name = file_name(doc.doc_id)
        if name in names:
            raise ValueError(f"documents {names[name]!r} and {doc.doc_id!r} map to the same file {name}")
        names[name] = doc.doc_id
        path, text = folder / name, document_markdown(doc)
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
    for stale in folder.glob("*.md"):
        if stale.name not in names:
            stale.unlink()
    return names


@contextlib.contextmanager
def eval_index(
    *, name: str, key: str, documents: Iterable[Document], progress: ProgressFn | None = None
) -> Iterator[EvalIndex]:
    """Build (or reuse) the index and bind the default connection to it inside the block.

    Ingest runs without source summaries (they are never searched, and thousands of
    LLM calls would dominate the build). Contextual prefixes are embedded with their
    chunk, so they change retrieval: they follow ``embedding.context_model`` (default
    ``none``; one local-model call per chunk when set).
    """
    folder = Path(settings.FOUNDRY_HOME) / "eval-cache" / f"{_UNSAFE.sub('_', name)}-{key[:16]}"
    names = documents_write(folder / "docs", documents)
    lean = settings.FOUNDRY.with_overrides(ingest={"summary_model": "none"})
    if connection.vendor == "postgresql":
        # One per home too: its sources are the documents under this home's folder. At most 63 bytes.
        tag = hashlib.sha256(f"{key}\n{folder.resolve()}".encode()).hexdigest()[:16]
        database = f"{connection.settings_dict['NAME'][:40]}_eval_{tag}"
        bound = postgresql_database_use(database)
    else:
        database = str(folder / "index.sqlite3")
        bound = database_use(Path(database))
    with bound:
        with override_settings(FOUNDRY=lean):
            report = knowledge_base_ingest(target=folder / "docs", collection=EVAL_COLLECTION, progress=progress)
        doc_of_chunk = {
            cid: names[path] for cid, path in Chunk.objects.values_list("id", "source__path") if path in names
        }
        yield EvalIndex(folder=folder, database=database, ingest=report, doc_of_chunk=doc_of_chunk)
