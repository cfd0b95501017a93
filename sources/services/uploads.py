"""Uploads: a file from a browser or API client becomes a stored file and an ingested source.

Every check (name, type, size, content) runs before anything is written under
MEDIA_ROOT. The client's file name is never trusted: it is reduced to a plain
name (no folders, no control characters, no leading dots) and the file is
stored as MEDIA_ROOT/<collection>/<name>. A name that already exists is
refused unless the caller asks to replace it, in which case the new bytes
become a new version of the same source.
"""

from __future__ import annotations

import codecs
import logging
import os
import re
import tempfile
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile

from sources.models import Collection, Source
from sources.services.extract import KINDS
from sources.services.ingest import FileResult, source_delete
from sources.services.ingest_jobs import knowledge_base_ingest

logger = logging.getLogger(__name__)

ALLOWED_SUFFIXES = tuple(sorted(KINDS))
# The first bytes of each binary kind. Office files are zip archives; a password-protected one is an
# OLE container instead, let through so that ingest can say why it cannot be read.
_ZIP_OR_OLE = (b"PK\x03\x04", b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1")
MAGIC: dict[str, tuple[bytes, ...] | bytes] = {
    "pdf": b"%PDF-",
    "docx": _ZIP_OR_OLE,
    "pptx": _ZIP_OR_OLE,
    "xlsx": _ZIP_OR_OLE,
    "image": (b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"II*\x00", b"MM\x00*"),
}
MAGIC_NAMES = {
    "pdf": "a PDF",
    "docx": "a Word document",
    "pptx": "a PowerPoint presentation",
    "xlsx": "an Excel workbook",
    "image": "a PNG, JPEG or TIFF image",
}
MAX_NAME_LENGTH = 150
_SNIFF_BYTES = 8192


class UploadRejected(Exception):
    """The upload was refused before anything was stored; the message says why."""

    status_code = 400


class UploadTooLarge(UploadRejected):
    status_code = 413


class UploadExists(UploadRejected):
    status_code = 409


@dataclass(frozen=True)
class UploadResult:
    name: str
    replaced: bool
    result: FileResult
    source: Source | None


def upload_filename(name: str) -> str:
    """A safe file name made from a client-supplied one, or UploadRejected.

    Keeps only the last path component (browsers on Windows send full paths),
    drops control and format characters, replaces anything but letters, digits,
    ``-``, ``_``, ``.`` and spaces by ``_``, and strips leading dots so the file
    can never be hidden, ``..`` or outside the collection folder.
    """
    name = unicodedata.normalize("NFC", name or "")
    name = re.split(r"[\\/]", name)[-1]
    name = "".join(ch for ch in name if unicodedata.category(ch)[0] != "C")
    name = re.sub(r"[^\w.\- ]", "_", name)
    name = re.sub(r"\s+", " ", name).strip(" .")
    stem, dot, suffix = name.rpartition(".")
    if not dot or not stem.strip(" ._"):
        raise UploadRejected(f"unsupported file type: the name needs one of {', '.join(ALLOWED_SUFFIXES)}")
    suffix = "." + suffix.lower()
    if suffix not in ALLOWED_SUFFIXES:
        raise UploadRejected(f"unsupported file type {suffix!r}: allowed are {', '.join(ALLOWED_SUFFIXES)}")
    return stem[: MAX_NAME_LENGTH - len(suffix)].rstrip(" .") + suffix


def upload_check(*, name: str, size: int, head: bytes) -> str:
    """Check an upload's name, size and first bytes; return the safe name or raise UploadRejected."""
    safe = upload_filename(name)
    limit_mb = settings.FOUNDRY.ingest.max_file_mb
    if size > limit_mb * 1024 * 1024:
        raise UploadTooLarge(
            f"file is too large: {size / 1048576:.1f} MB, the limit is {limit_mb:g} MB (ingest.max_file_mb)"
        )
    if size == 0 or not head:
        raise UploadRejected("the file is empty")
    suffix = safe[safe.rindex(".") :]
    kind = KINDS[suffix]
    if kind in MAGIC:
        if not head.startswith(MAGIC[kind]):
            raise UploadRejected(f"the file is named {suffix} but is not {MAGIC_NAMES[kind]}")
    elif kind == "html":
        if b"\x00" in head:  # HTML may declare another charset; only binary content is refused here
            raise UploadRejected(f"{suffix} files must be text (this one has NUL bytes)")
    elif b"\x00" in head or not _is_utf8_start(head):
        raise UploadRejected(f"{suffix} files must be UTF-8 text")
    return safe


def _is_utf8_start(head: bytes) -> bool:
    # An incremental decoder accepts a multi-byte character cut off at the end of ``head``.
    try:
        codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
    except UnicodeDecodeError:
        return False
    return True


def upload_store(*, collection: Collection, upload: UploadedFile, replace: bool = False) -> tuple[Path, bool]:
    """Check and store ``upload`` under MEDIA_ROOT/<collection>/; return (path, replaced an existing file)."""
    upload.seek(0)
    head = upload.read(_SNIFF_BYTES)
    upload.seek(0)
    name = upload_check(name=upload.name or "", size=upload.size or 0, head=head)
    media = Path(os.path.abspath(settings.MEDIA_ROOT))
    folder = media / collection.name
    # The collection name is a slug; this guards against a name edited in the database.
    if folder.parent != media or not re.fullmatch(r"[-\w]+", collection.name):
        raise UploadRejected(f"collection name {collection.name!r} cannot be used as a folder")
    folder.mkdir(parents=True, exist_ok=True)
    dest = folder / name
    if dest.is_symlink() or (dest.exists() and not dest.is_file()):
        raise UploadRejected(f"{name} exists and is not a regular file")
    ingested = Source.objects.filter(collection=collection, path=name).exclude(root=str(folder)).first()
    if ingested is not None:  # 'replace' replaces an upload; a folder's file is that folder's to change
        raise UploadExists(
            f"{name} is already in collection {collection.name}, ingested from a folder "
            f"(source {ingested.pk}, not an upload); give the upload another name, or delete "
            "that source first"
        )
    exists = dest.exists()
    if exists and not replace:
        raise UploadExists(
            f"{name} already exists in collection {collection.name}; "
            "upload it again with 'replace' to store it as a new version"
        )
    _write(upload, folder=folder, dest=dest, replace=replace)
    logger.info("upload stored collection=%s size=%s replaced=%s", collection.pk, upload.size, exists)
    return dest, exists


def _write(upload: UploadedFile, *, folder: Path, dest: Path, replace: bool) -> None:
    # Write to a hidden temporary file first (folder ingests skip hidden files),
    # then move it into place, so a reader never sees half a file. Without
    # replace, os.link fails if another upload took the name in the meantime.
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".upload-")
    try:
        with os.fdopen(fd, "wb") as handle:
            for piece in upload.chunks():
                handle.write(piece)
        os.chmod(tmp, 0o644)  # mkstemp makes it 0600; a Celery worker under another user must read it
        if replace:
            os.replace(tmp, dest)
        else:
            try:
                os.link(tmp, dest)
            except FileExistsError:
                raise UploadExists(f"{dest.name} was uploaded by someone else just now") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def source_upload(*, collection: Collection, upload: UploadedFile, replace: bool = False) -> UploadResult:
    """Store ``upload`` in ``collection`` and ingest that one file.

    The caller has already checked that the user may upload to ``collection``.
    Re-uploading identical bytes with ``replace`` reports the source unchanged.
    """
    dest, replaced = upload_store(collection=collection, upload=upload, replace=replace)
    report = knowledge_base_ingest(target=dest, collection=collection.name)
    result = report.files[0]
    source = Source.objects.filter(root=str(dest.parent), path=dest.name).first()
    return UploadResult(name=dest.name, replaced=replaced, result=result, source=source)


def source_remove(*, source_id: int) -> None:
    """Delete a source with its chunks and vectors; an uploaded file is deleted too.

    Files in a knowledge-base folder belong to the user and are left alone (the
    next ``foundry ingest`` of that folder would add them again).
    """
    source = Source.objects.filter(pk=source_id).first()
    if source is None:
        return
    source_delete(source_id=source_id)
    media = Path(os.path.abspath(settings.MEDIA_ROOT))
    path = Path(os.path.abspath(source.absolute_path))
    if path.is_relative_to(media) and path.is_file() and not path.is_symlink():
        path.unlink()
    logger.info("source removed id=%s", source_id)
