"""Folders bound to collections, and keeping them in sync.

A collection may be bound to one folder (``collection_bind``). ``collections_sync``
re-ingests every bound folder as an ordinary ingest job: changed and new files in,
sources whose file is gone out, unchanged files skipped.

A sync never empties a collection because its folder went away: a bound folder that
is missing, not a folder, unreadable, or empty while the collection holds sources from
it (a drive not mounted) fails that collection's sync with the reason, and its sources
stay. Only one job at a time works on a bound folder (``ingest_job_create(exclusive=True)``).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

from django.db import transaction
from django.utils import timezone

from sources.models import Collection, IngestJob, Source
from sources.services import ingest_jobs
from sources.services.collections import CollectionError
from sources.services.ingest import CollectionMoveRefused, ProgressFn, collection_get_or_create

logger = logging.getLogger(__name__)


class FolderUnavailable(Exception):
    """A bound folder cannot be synced now (missing, unreadable, or empty while sources came from it)."""


@dataclass(frozen=True)
class SyncResult:
    """What one collection's sync did: ``synced`` (job finished), ``queued`` (a worker does it),
    ``busy`` (a job already works on the folder) or ``failed`` (``reason`` says why; nothing was removed)."""

    collection: str
    folder: str
    status: str
    reason: str = ""
    job_id: int | None = None
    counts: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {
            "collection": self.collection,
            "folder": self.folder,
            "status": self.status,
            "reason": self.reason,
            "job": self.job_id,
            **self.counts,
        }


def _overlap(a: str, b: str) -> bool:
    return a == b or a.startswith(b.rstrip("/") + "/") or b.startswith(a.rstrip("/") + "/")


def collection_bind(*, collection: str, folder: Path) -> Collection:
    """Bind ``collection`` (created when new) to ``folder``, replacing an earlier binding of that collection.

    Raises CollectionError when the folder does not exist or is not a folder, or when it is, contains or
    lies inside the folder bound to another collection (its files would belong to both).
    """
    folder = Path(os.path.abspath(os.path.expanduser(folder)))
    if not folder.exists():
        raise CollectionError(f"{folder}: no such folder")
    if not folder.is_dir():
        raise CollectionError(f"{folder}: not a folder (bind a folder; `foundry ingest` takes single files)")
    real = os.path.realpath(folder)
    with transaction.atomic():  # the overlap check and the binding in one write transaction
        for other in Collection.objects.exclude(folder="").exclude(name=collection).order_by("name"):
            if _overlap(real, os.path.realpath(other.folder)):
                how = "is already bound to" if real == os.path.realpath(other.folder) else "overlaps the folder of"
                raise CollectionError(
                    f"{folder} {how} collection {other.name!r} ({other.folder}): a file would belong to both. "
                    f"Bind folders that do not contain each other, or `foundry collections unbind {other.name}`"
                )
        coll = collection_get_or_create(name=collection)
        coll.folder, coll.sync_error = str(folder), ""
        coll.save(update_fields=["folder", "sync_error"])
    logger.info("collection bound collection=%s", coll.pk)
    return coll


def collection_unbind(*, collection: str) -> Collection:
    """Stop syncing ``collection``'s folder. Its sources stay. Raises CollectionError when it is not bound."""
    coll = Collection.objects.filter(name=collection).first()
    if coll is None:
        raise CollectionError(f"no collection named {collection!r}")
    if not coll.folder:
        raise CollectionError(f"collection {collection!r} is not bound to a folder")
    coll.folder, coll.sync_error = "", ""
    coll.save(update_fields=["folder", "sync_error"])
    logger.info("collection unbound collection=%s", coll.pk)
    return coll


def bound_collections(names: list[str] | None = None) -> list[Collection]:
    """Bound collections by name; ``names`` picks some (CollectionError for an unknown or unbound name)."""
    bound = Collection.objects.exclude(folder="").order_by("name")
    if not names:
        return list(bound)
    found = {c.name: c for c in bound.filter(name__in=names)}
    for name in names:
        if name not in found:
            known = Collection.objects.filter(name=name).exists()
            raise CollectionError(
                f"collection {name!r} is not bound to a folder (foundry collections bind)"
                if known
                else f"no collection named {name!r}"
            )
    return [found[name] for name in names]


def folder_check(folder: Path) -> None:
    """Raise FolderUnavailable when ``folder`` is missing, not a folder, or it or a folder in it cannot be listed.

    The ingest scan skips what it cannot list, so an unreadable sub-folder (a share whose permissions
    changed, a mount inside the tree that failed) would look empty and its sources would be removed.
    """
    if not folder.exists():
        raise FolderUnavailable(f"bound folder {folder} is missing (a drive not mounted?)")
    if not folder.is_dir():
        raise FolderUnavailable(f"bound folder {folder} is not a folder")

    def unreadable(error: OSError) -> None:
        where = "" if Path(error.filename or folder) == folder else f" (its folder {error.filename})"
        raise FolderUnavailable(f"bound folder {folder}{where} cannot be read ({error.strerror or error})")

    for _ in os.walk(folder, onerror=unreadable, followlinks=False):
        pass


def _kept(coll: Collection, reason: str, *, or_else: str = "") -> str:
    count = Source.objects.filter(collection=coll, root=coll.folder).count()
    return (
        f"{reason}; its {count} source(s) are kept. Mount or restore the folder, or "
        f"`foundry collections unbind {coll.name}`{or_else}"
    )


def collection_sync(*, collection: Collection, wait: bool = True, on_file: ProgressFn | None = None) -> SyncResult:
    """Sync one bound collection; never raises for the folder or the job, the result says what happened."""
    folder = Path(collection.folder)
    result = SyncResult(collection.name, collection.folder, "failed")
    try:
        folder_check(folder)
        job = ingest_jobs.ingest_job_create(target=folder, collection=collection.name, exclusive=True)
    except ingest_jobs.IngestJobBusy as exc:
        return SyncResult(collection.name, collection.folder, "busy", str(exc), exc.job.pk)
    except FolderUnavailable as exc:
        return _failed(collection, result, _kept(collection, str(exc)))
    except (OSError, CollectionMoveRefused) as exc:
        return _failed(collection, result, str(exc))
    if job.files_total == 0 and Source.objects.filter(collection=collection, root=job.root).exists():
        # An empty folder that sources came from is far likelier an unmounted drive than every file deleted.
        reason = _kept(
            collection,
            f"bound folder {folder} is empty (a drive not mounted?)",
            or_else=f"; if its files really were deleted, `foundry ingest {folder} --collection "
            f"{collection.name}` removes their sources",
        )
        ingest_jobs.ingest_job_abort(job_id=job.pk, reason=reason)
        return _failed(collection, result, reason, job.pk)
    Collection.objects.filter(pk=collection.pk).update(synced_at=timezone.now(), sync_error="")
    if not wait:
        ingest_jobs.ingest_job_enqueue(job_id=job.pk)
        return SyncResult(collection.name, collection.folder, "queued", job_id=job.pk)
    try:
        job = ingest_jobs.ingest_job_execute(job_id=job.pk, on_file=on_file)
    except ingest_jobs.IngestJobFailed as exc:
        return _failed(collection, result, str(exc), job.pk)
    counts = ingest_jobs.ingest_job_report(job).as_dict()
    counts.pop("files")
    return SyncResult(collection.name, collection.folder, "synced", job_id=job.pk, counts=counts)


def _failed(collection: Collection, result: SyncResult, reason: str, job_id: int | None = None) -> SyncResult:
    logger.warning("sync failed collection=%s: %s", collection.pk, reason)
    Collection.objects.filter(pk=collection.pk).update(sync_error=reason[:2000])
    return SyncResult(result.collection, result.folder, "failed", reason, job_id)


def collections_sync(
    *, names: list[str] | None = None, wait: bool = True, on_file: ProgressFn | None = None
) -> list[SyncResult]:
    """Sync every bound collection (or those named), one after another; one failure does not stop the others.

    ``wait=False`` (the scheduled task on a worker) queues each job and returns without waiting for it.
    """
    return [collection_sync(collection=coll, wait=wait, on_file=on_file) for coll in bound_collections(names)]


def sync_summary(collection: Collection) -> str:
    """One line for listings: when the bound folder was last synced, or why that failed."""
    if not collection.folder:
        return ""
    if collection.sync_error:
        return f"sync failed: {collection.sync_error}"
    last = IngestJob.objects.filter(collection=collection, target=collection.folder).order_by("-pk").first()
    if collection.synced_at is None or last is None:
        return "not synced yet"
    return f"synced {collection.synced_at:%Y-%m-%d %H:%M} UTC (job {last.pk}, {last.status})"
