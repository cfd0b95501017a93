"""``foundry ingest`` and ``foundry export``."""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TextIO

from django.conf import settings
from django.core.management import CommandError
from django.db import DatabaseError, connection
from tqdm import tqdm

from sources import selectors
from sources.models import Collection
from core import jobs
from foundry_site.cli.display import database_error_message, output_file_check, safe, safe_json, safe_text
from sources.services import ingest_jobs
from sources.services.chunking_settings import chunking_configured, chunking_drift_warning
from sources.services.ingest import DEFAULT_COLLECTION, FileResult, IngestReport
from sources.services.sync import sync_summary
from sources.vectorstore import EmbeddingModelChanged


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ingest", help="ingest a folder or file into the knowledge base")
    p.add_argument("path", nargs="?", default=None, help="folder or file (default: knowledge_base/)")
    p.add_argument("--collection", default=DEFAULT_COLLECTION, help="collection the sources belong to")
    p.add_argument("--include-private", action="store_true", default=None, help="also ingest private/ folders")
    p.add_argument(
        "--move",
        action="store_true",
        help="move files already ingested into another collection into this one (refused otherwise)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON summary instead of a table")
    p.add_argument(
        "--detach",
        action="store_true",
        help="with a broker: queue the job, print its id and return (follow it with foundry jobs)",
    )
    p.set_defaults(handler=ingest_command)

    e = sub.add_parser("export", help="write documents.csv (one row per chunk)")
    e.add_argument("output", nargs="?", default="documents.csv")
    e.add_argument("--collection", default=None)
    e.set_defaults(handler=export_command)

    s = sub.add_parser("status", help="show what is in the knowledge base")
    s.set_defaults(handler=status_command)

    c = sub.add_parser("check", help="check the index: SQLite integrity, chunks = FTS rows = vectors")
    c.add_argument(
        "--repair",
        action="store_true",
        help="first rebuild the keyword index from the chunks, embed chunks that lack a vector, delete orphan vectors",
    )
    c.set_defaults(handler=check_command)


def ingest_command(opts: argparse.Namespace, out: TextIO) -> int:
    target = Path(opts.path) if opts.path else Path(settings.FOUNDRY_KNOWLEDGE_BASE)
    job = ingest_jobs.ingest_job_create(
        target=target, collection=opts.collection, include_private=opts.include_private, move=opts.move
    )
    if opts.detach and not jobs.is_eager():
        ingest_jobs.ingest_job_enqueue(job_id=job.pk)
        out.write(json.dumps({"job": job.pk}) + "\n" if opts.json else f"Ingest job {job.pk} queued.\n")
        return 0
    bar = tqdm(
        total=job.files_total,
        unit="file",
        file=sys.stderr,
        disable=opts.json or None,
        desc=f"ingest job {job.pk}",
        dynamic_ncols=True,
    )
    try:
        with _sigterm_as_interrupt():
            job = ingest_jobs.ingest_job_execute(job_id=job.pk, on_file=_progress_bar(bar))
    except KeyboardInterrupt:
        if jobs.is_eager():  # the work stops with this process: say so on the job, not leave it "running"
            ingest_jobs.ingest_job_abort(
                job_id=job.pk,
                reason="interrupted (Ctrl-C or SIGTERM) before every file "
                f"was done; `foundry jobs retry {job.pk}` does the rest",
            )
            sys.stderr.write(
                f"\nInterrupted. Files already stored stay; `foundry jobs retry {job.pk}` (or "
                "`foundry ingest` again) does the rest.\n"
            )
            return 130
        sys.stderr.write(f"\nStopped waiting; ingest job {job.pk} goes on in the background (foundry jobs).\n")
        return 130
    except ingest_jobs.IngestJobFailed as exc:
        sys.stderr.write(f"{safe_text(str(exc))}\n(foundry jobs retry {job.pk} re-queues it)\n")
        return 1
    except DatabaseError as exc:
        message = database_error_message(exc)
        ingest_jobs.ingest_job_abort(job_id=job.pk, reason=message)
        sys.stderr.write(f"\nIngest job {job.pk} stopped. {message}\n")
        return 1
    finally:
        bar.close()
    report = ingest_jobs.ingest_job_report(job)
    stored = report.count("ingested") + report.count("unchanged")
    if opts.json:
        out.write(safe_json(report.as_dict()) + "\n")
    else:
        out.write(format_report(report, target=target, collection=opts.collection))
        out.write(next_step() if stored else _nothing_stored(report, target))
    # a script sees that a file is missing (the others stay stored), or that nothing it named could be ingested
    return 1 if report.count("failed") or (report.count("skipped") and not stored) else 0


def _nothing_stored(report: IngestReport, target: Path) -> str:
    if not report.files:
        return f"\nNo files found in {safe(str(target))}.\n"
    return f"\nNothing from {safe(str(target))} is stored: see each file's reason.\n"


def _progress_bar(bar: tqdm) -> Callable[[FileResult], None]:
    """A per-file callback that moves the bar: files done, chunks, chunks per second, current file."""
    chunks = 0

    def progress(result: FileResult) -> None:
        nonlocal chunks
        if result.status == "ingested":
            chunks += result.chunks
        if result.status != "removed":
            bar.update(1)
        rate = chunks / bar.format_dict["elapsed"] if bar.format_dict["elapsed"] else 0.0
        bar.set_postfix_str(f"{chunks} chunks, {rate:.1f} chunks/s, {safe(result.path)[-40:]}")

    return progress


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM (``kill``, a stopping container) ends the wait like Ctrl-C does, so the job is told."""
    if threading.current_thread() is not threading.main_thread():  # signals reach the main thread only
        yield
        return
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def next_step() -> str:
    """What to do after an ingest: ask, on the command line or in the web UI (after creating an account)."""
    from django.contrib.auth import get_user_model

    from foundry_site.cli.init import WEB_URL

    account = (
        ""
        if get_user_model().objects.filter(is_active=True).exists()
        else " (create an account first: foundry init --admin NAME)"
    )
    return (
        f'\nNext: ask a question: foundry query "your question"\n'
        f"      or in the web UI: foundry serve, then open {WEB_URL}{account}\n"
    )


def format_report(report: IngestReport, *, target: Path, collection: str) -> str:
    counts = report.as_dict()
    lines = [f"Ingest of {target} into collection '{collection}'", ""]
    for status in ("ingested", "unchanged", "skipped", "failed", "removed"):
        chunks = counts["chunks"]
        extra = f"  ({chunks} chunk{'' if chunks == 1 else 's'})" if status == "ingested" else ""
        lines.append(f"  {status:<10} {counts[status]:>5}{extra}")
    lines += ["", f"  {'status':<10} {'chunks':>6}  {'file':<40}  reason"]
    for f in report.files:
        chunks = str(f.chunks) if f.status in ("ingested", "unchanged") else ""
        lines.append(f"  {f.status:<10} {chunks:>6}  {safe(f.path):<40}  {safe(f.reason)}".rstrip())
    return "\n".join(lines) + "\n"


EXPORT_COLUMNS = ["doc_id", "path", "title", "chunk_id", "chunk_text", "created_at", "updated_at"]


def export_command(opts: argparse.Namespace, out: TextIO) -> int:
    path = Path(opts.output).expanduser().absolute()
    output_file_check(path, option="output")
    if opts.collection and not Collection.objects.filter(name=opts.collection).exists():
        raise CommandError(f"--collection: no collection named {opts.collection!r} (foundry collections list)")
    tmp = path.with_name(path.name + ".part")
    rows = 0
    try:
        with tmp.open("w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(EXPORT_COLUMNS)
            for chunk in selectors.chunks_for_export(collection=opts.collection):
                writer.writerow(
                    [
                        chunk.source_id,
                        chunk.source.path,
                        chunk.source.title,
                        chunk.pk,
                        chunk.text,
                        chunk.source.created_at.isoformat(),
                        chunk.source.updated_at.isoformat(),
                    ]
                )
                rows += 1
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)  # a half-written export is never left behind
        raise
    out.write(f"Wrote {rows} chunks to {path}\n")
    return 0


def status_command(opts: argparse.Namespace, out: TextIO) -> int:
    """What is in the index: sources per status, chunks, FTS rows, vectors and window vectors."""
    overview = selectors.index_overview()
    model = settings.FOUNDRY.embedding.model
    counts = selectors.index_counts(model=model)
    out.write(f"Knowledge base: {settings.DATABASES['default']['NAME']}\n")
    out.write(f"Embedding model: {model}\n")
    stale = selectors.stale_embeddings(model=model)
    if stale:
        changed = EmbeddingModelChanged(model, stale)
        out.write(f"WARNING: {changed.problem}\n{changed.fix}\n")
    configured = chunking_configured()
    drift = selectors.chunking_drift(chunking=configured, model=model)
    if drift:
        out.write(f"WARNING: {chunking_drift_warning(configured=configured, drift=drift)}\n")
    out.write(
        f"Sources: {len(overview)}  chunks: {counts['chunks']}  FTS rows: {counts['fts']}  "
        f"vectors: {counts['vectors']}  window vectors: {counts['windows']}\n"
    )
    for coll in Collection.objects.exclude(folder="").order_by("name"):
        out.write(f"Collection {coll.name} is bound to {safe(coll.folder)}: {safe(sync_summary(coll))}\n")
    out.write("\n")
    out.write(f"  {'collection':<12} {'status':<9} {'chunks':>6}  {'file':<36}  title / reason\n")
    for row in overview:
        detail = row["reason"] if row["status"] != "ingested" else row["title"]
        out.write(
            f"  {safe(row['collection']):<12} {row['status']:<9} {row['chunks']:>6}  {safe(row['path']):<36}  "
            f"{safe(detail)}\n"
        )
    return 0


def check_command(opts: argparse.Namespace, out: TextIO) -> int:
    from sources.services.integrity import index_check, index_repair

    if opts.repair:
        repaired = index_repair()
        out.write(f"Repaired: keyword index rebuilt from the chunks ({repaired.fts_rows} rows), ")
        out.write(f"{repaired.chunks_embedded} chunk(s) embedded again")
        orphans = ", ".join(f"{n} in {table}" for table, n in repaired.orphans_deleted.items())
        out.write(f", orphan vectors deleted: {orphans}\n" if orphans else ", no orphan vectors\n")
    report = index_check()
    label = "PRAGMA integrity_check" if connection.vendor == "sqlite" else "PostgreSQL keyword triggers"
    out.write(f"{label}: {report.sqlite}\n")
    out.write("".join(f"  {name}: {count}\n" for name, count in report.counts.items()))
    for problem in report.problems:
        out.write(f"PROBLEM: {problem}\n")
    for warning in report.warnings:
        out.write(f"WARNING: {warning}\n")
    fix = "run `foundry check --repair`, or `foundry ingest` again" if not opts.repair else "run `foundry ingest` again"
    out.write("OK\n" if report.ok else f"The index is inconsistent: {fix} to repair it.\n")
    return 0 if report.ok else 1
