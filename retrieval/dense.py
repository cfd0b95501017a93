"""Fast exact dense search: a memory-mapped float32 copy of the vectors, scanned with numpy.

Why: sqlite-vec 0.1.9's vec0 scan takes ~300 ms per query at 1M 384-d vectors, mostly
per-row overhead; one BLAS matrix-vector product over the same float32 vectors takes
~35 ms. sqlite-vec's newer indexes (0.1.10 alphas: ``rescore``, DiskANN; IVF is not in
the published wheel) refuse the ``collection_id`` metadata column that scopes every
search, and DiskANN builds far too slowly (docs/decisions.md, D0002).

Design (keep it explainable):

- **vec0 stays the store of record.** Ingest writes only vec0; this module keeps a
  derived copy per database, embedding model and index version, in
  ``FOUNDRY_HOME/dense/<database>/<model slug>/<version hash>/``: ``vectors.f32``
  (row-normalised float32, row-major), ``signs.npy`` (their sign bits), ``ids.npy``
  (unit ids: a row is a chunk's own vector, ``chunk_id * WINDOW_SLOTS``, or one of its
  sentence windows, its window id; ``unit // WINDOW_SLOTS`` is the chunk),
  ``collections.npy`` (the collection column of the vec0 rows, so scoping is the same
  as ``nearest()``'s) and ``meta.json``. A chunk scores the best of its rows.
- **Searched exactly**, with a sign-bit shortlist above a size: ``retrieval.dense_matrix``.
- **Never stale.** Every search reads ``vectorstore.vectors_version`` (< 1 ms) and uses
  the copy of exactly that version. A missing copy is built before the search answers:
  under an exclusive ``flock`` (one gunicorn/Celery/CLI process builds, the others wait
  and then map the result), written to a temporary folder and renamed into place, so a
  reader never sees half a copy. The build reads the version, the vectors (one
  statement, one snapshot, per table) and the version again, and starts over if an ingest committed
  in between: a copy never carries a version it does not hold. Older copies are deleted
  after a build; processes still mapping one keep a consistent (older) view until their
  next search.
- **Refreshed, not rebuilt.** A new version is written from the newest complete copy:
  chunk ids are AUTOINCREMENT and never reused, and a chunk's vectors and collection never
  change (a changed or moved file gets new chunks), so the new copy is the old rows whose
  unit id vec0 still holds plus the vec0 rows above the old highest unit id. Only those new
  vectors are read: by key when they are few against the table (``LOOKUP_COST``), else by one
  step through it. The unit ids are counted in sqlite-vec's row-id tables; only when rows were
  deleted are they all read, to find which (``ChunkSearchManager.unit_ids``). The old
  ``vectors.f32`` is not copied: the new folder hard-links the same file and the new rows are
  appended to it (in unit id order, so the file's rows stay in unit id order). A process
  still mapping the old version maps only the rows its ``meta.json`` names, which never
  change; bytes past them (an append whose version was given up, or a build that died) are
  cut off before the next append. A row whose vector vec0 no longer holds stays in the file,
  marked ``DEAD`` in ``collections.npy``, and no search returns it; when dead rows would
  pass ``COMPACT_SHARE`` of the file, the build writes a new file of the live rows instead.
  Either way the live rows, their sign bits, ids and collections are exactly what a full
  read writes, in the same order. Without a usable previous copy (none, unreadable, another
  width, or its ids do not add up to vec0's) the build reads every vector and logs why.
  ``retrieve()`` records the build, either way, as the ``dense_index_build`` timing.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
from django.conf import settings
from django.db import connection

from retrieval.dense_matrix import DEAD, DenseIndexError, DenseMatrix, contained, sign_word_count, sign_words
from retrieval.models import ChunkSearch
from retrieval.fusion import Hit
from sources import vectorstore

logger = logging.getLogger(__name__)

BUILD_ATTEMPTS = 5  # version moved during a read this many times in a row: give up and say so
COPY_ROWS = 65_536  # rows per write when assembling a copy (~100 MB of 384-d float32)
# The format of a copy's files, part of its folder name (2: signs.npy added; 3: rows are units,
# windows included; 4: dead rows).
FORMAT = 4
COMPACT_SHARE = 0.25  # a refresh that would leave more dead rows than this share of the file writes a new file
# New rows x LOOKUP_COST < stored rows: read the new rows by key (14 µs a chunk's vector, 145 µs a
# window's, at 4M rows), not by vec0's step through every row (~0.27 µs a row).
LOOKUP_COST = 400


_loaded: dict[Path, DenseMatrix] = {}
_loaded_lock = threading.Lock()


def root_folder(model: str) -> Path:
    """Where the copies of ``model``'s vectors for the current database live."""
    conn = connection.settings_dict
    if connection.vendor == "sqlite":
        database, stem = str(Path(str(conn["NAME"])).resolve()), Path(str(conn["NAME"])).stem
    else:  # a server's database: the same name on another host or port is another database
        database, stem = f"{connection.vendor}://{conn['HOST']}:{conn['PORT']}/{conn['NAME']}", str(conn["NAME"])
    tag = f"{stem}-{hashlib.sha256(database.encode()).hexdigest()[:12]}"
    return Path(settings.FOUNDRY_HOME) / "dense" / tag / vectorstore.model_slug(model)


def nearest(
    vector: Sequence[float], *, model: str, k: int = 20, collection_ids: Sequence[int] | None = None, shortlist: int = 0
) -> list[Hit]:
    """Nearest chunks by cosine similarity, best first: the same answer as ``ChunkSearch.search.nearest``
    (with a ``shortlist``, see ``DenseMatrix.search``)."""
    if not vectorstore.table_exists(model):
        raise vectorstore.MissingEmbeddings(model)
    if collection_ids is not None and not collection_ids:
        return []
    matrix, _ = current(model)
    return matrix.search(vector, k=k, collection_ids=collection_ids, shortlist=shortlist)


def current(model: str) -> tuple[DenseMatrix, bool]:
    """The copy for the database's current vectors, and whether this call had to build it."""
    built = False
    for _ in range(BUILD_ATTEMPTS):
        folder = root_folder(model) / _version_hash(vectorstore.vectors_version(model))
        with _loaded_lock:
            cached = _loaded.get(folder)
        if cached is not None:
            return cached, built
        if not (folder / "meta.json").exists():
            folder, fresh = _build(model)
            built = built or fresh
        try:
            matrix = _open(folder)
        except FileNotFoundError:  # a peer replaced it with a newer version between our check and open
            continue
        with _loaded_lock:
            for stale in [f for f in _loaded if f.parent == folder.parent and f != folder]:
                del _loaded[stale]
            _loaded[folder] = matrix
        return matrix, built
    raise DenseIndexError(
        f"the dense matrix of {model} was replaced during each of {BUILD_ATTEMPTS} reads; "
        "retry when the running ingest has finished"
    )


def _version_hash(version: str) -> str:
    return hashlib.sha256(f"{FORMAT}:{version}".encode()).hexdigest()[:20]


@contextlib.contextmanager
def _exclusive(root: Path) -> Iterator[None]:
    root.mkdir(parents=True, exist_ok=True)
    with open(root / "build.lock", "a+b") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _build(model: str) -> tuple[Path, bool]:
    """Write the copy of the current vectors (unless a peer did while we waited); return its folder."""
    root = root_folder(model)
    with _exclusive(root):
        for attempt in range(BUILD_ATTEMPTS):
            version = vectorstore.vectors_version(model)
            folder = root / _version_hash(version)
            if (folder / "meta.json").exists():
                return folder, False
            for leftover in root.glob(".tmp-*"):  # a build that died; we hold the lock, so nobody writes it
                shutil.rmtree(leftover, ignore_errors=True)
            start = time.perf_counter()
            staging = Path(tempfile.mkdtemp(prefix=".tmp-", dir=root))
            base = _previous(root, model)
            try:
                rows, dimension, read = _write(model, staging, base)
            except DenseIndexError as exc:
                if base is None:
                    raise
                if vectorstore.vectors_version(model) != version:  # not damage: an ingest committed mid-read
                    shutil.rmtree(staging, ignore_errors=True)
                    continue
                logger.warning("dense matrix: %s; reading every vector", exc)
                base = None
                rows, dimension, read = _write(model, staging, base)
            if vectorstore.vectors_version(model) != version:
                shutil.rmtree(staging, ignore_errors=True)
                logger.info(
                    "dense matrix: an ingest committed during the read (attempt %s); reading again", attempt + 1
                )
                continue
            meta = {"version": version, "rows": rows, "dimension": dimension, "model": model}
            (staging / "meta.json").write_text(json.dumps(meta))
            os.replace(staging, folder)
            for old in root.iterdir():
                if old.is_dir() and old != folder:
                    shutil.rmtree(old, ignore_errors=True)
            logger.info(
                "dense matrix built: %s rows (%s vectors read from vec0, the others kept from %s) in %.1f s (%s)",
                rows,
                read,
                base.folder.name if base else "no previous copy",
                time.perf_counter() - start,
                folder,
            )
            return folder, True
    raise DenseIndexError(
        f"the vectors of {model} changed during each of {BUILD_ATTEMPTS} reads; "
        "retry when the running ingest has finished"
    )


def _previous(root: Path, model: str) -> DenseMatrix | None:
    """The newest complete copy, to refresh; None (logged) when there is none or it cannot be used."""
    copies = [f for f in root.iterdir() if not f.name.startswith(".tmp-") and (f / "meta.json").exists()]
    if not copies:
        logger.info("dense matrix: no previous copy of %s; reading every vector", model)
        return None
    newest = max(copies, key=lambda f: (f / "meta.json").stat().st_mtime)
    try:
        base = _open(newest)
    except (DenseIndexError, FileNotFoundError) as exc:
        logger.warning("dense matrix: cannot reuse %s (%s); reading every vector", newest, exc)
        return None
    dimension = vectorstore.table_dimension(model)
    if base.vectors.shape[1] != dimension:
        logger.warning(
            "dense matrix: cannot reuse %s (%s-d vectors, the table holds %s-d); reading every vector",
            newest,
            base.vectors.shape[1],
            dimension,
        )
        return None
    return base


def _write(model: str, staging: Path, base: DenseMatrix | None) -> tuple[int, int, int]:
    """Write the copy into ``staging``, rows in unit id order; return (rows, dimension, vectors read).

    Without a ``base`` (the previous copy) every vector is read; with one, only those above its
    highest unit id, appended to its ``vectors.f32`` (see the module docstring). Raises
    DenseIndexError when the kept and the read rows do not add up to vec0's unit ids (compared
    id by id when some were deleted), i.e. the base is damaged. The read rows are sorted because
    vec0 scans in storage order, and it reuses the slots of deleted rows.
    """
    dimension = vectorstore.table_dimension(model) or 0
    after = int(base.ids.max()) if base is not None and base.ids.size else 0
    alive = np.zeros(0, bool) if base is None else base.collections != DEAD
    live, stored, ids, collections = _read(model, staging / "read.f32", dimension, after=after, kept=int(alive.sum()))
    order = np.argsort(ids, kind="stable")
    read = _map(staging / "read.f32", ids.size, dimension)
    if base is None:
        _write_rows(staging / "vectors.f32", [(read, order)])
        kept_ids, kept_collections, old_signs = np.zeros(0, np.int64), np.zeros(0, np.int64), None
    else:
        keep = alive
        if live is not None:
            keep[keep] = contained(base.ids[keep], live)
        if int(keep.sum()) + ids.size != stored or np.any(np.diff(base.ids) <= 0):
            raise DenseIndexError(
                f"{base.folder} does not match {vectorstore.table_name(model)}: "
                f"{int(keep.sum())} rows kept + {ids.size} read, {stored} stored"
            )
        if base.ids.size + ids.size - stored <= COMPACT_SHARE * (base.ids.size + ids.size) and _link(base, staging):
            _write_rows(staging / "vectors.f32", [(read, order)], after_rows=base.ids.size)
            kept_ids, kept_collections = base.ids, np.where(keep, base.collections, DEAD)
            old_signs = base.signs
        else:  # too many dead rows (or no hard links here): a new file of the live ones
            kept = np.flatnonzero(keep)
            _write_rows(staging / "vectors.f32", [(base.vectors, kept), (read, order)])
            kept_ids, kept_collections, old_signs = base.ids[kept], base.collections[kept], None
    (staging / "read.f32").unlink()
    rows = kept_ids.size + ids.size
    vectors = _map(staging / "vectors.f32", rows, dimension)
    signs = np.empty((sign_word_count(dimension), rows), np.uint64)
    first = 0
    if old_signs is not None:
        first = old_signs.shape[1]
        signs[:, :first] = old_signs
    for start in range(first, rows, COPY_ROWS):
        signs[:, start : start + COPY_ROWS] = sign_words(vectors[start : min(start + COPY_ROWS, rows)]).T
    np.save(staging / "signs.npy", signs)
    np.save(staging / "ids.npy", np.concatenate([kept_ids, ids[order]]))
    np.save(staging / "collections.npy", np.concatenate([kept_collections, collections[order]]))
    return rows, dimension, ids.size


def _link(base: DenseMatrix, staging: Path) -> bool:
    """Hard-link the previous copy's vectors into ``staging``, to append to the same file; False (logged)
    where the file system cannot."""
    try:
        os.link(base.folder / "vectors.f32", staging / "vectors.f32")
    except OSError as exc:
        logger.warning(
            "dense matrix: cannot hard-link %s (%s); writing a new file of the live rows",
            base.folder / "vectors.f32",
            exc,
        )
        return False
    return True


def _write_rows(path: Path, parts: list[tuple[np.ndarray, np.ndarray]], *, after_rows: int | None = None) -> None:
    """Write ``vectors[rows]`` of each part to ``path``, in order, and sync it. With ``after_rows``,
    keep that many rows of the file (cutting off what lies past them) and append; without, write a
    new file (never through a link to a previous copy's file, which readers may be mapping)."""
    if after_rows is None:
        path.unlink(missing_ok=True)
    with open(path, "r+b" if after_rows is not None else "wb") as out:
        if after_rows is not None:
            row_bytes = 4 * parts[0][0].shape[1]
            if os.fstat(out.fileno()).st_size < after_rows * row_bytes:
                raise DenseIndexError(f"{path} holds fewer than the {after_rows} rows its copy names")
            out.truncate(after_rows * row_bytes)
            out.seek(after_rows * row_bytes)
        for vectors, rows in parts:
            for start in range(0, rows.size, COPY_ROWS):
                block = rows[start : start + COPY_ROWS]
                if np.all(np.diff(block) == 1):  # consecutive rows, as most are: write the slice, no gather
                    # numpy's stubs give ndarray the buffer protocol (__buffer__) only on Python 3.12+.
                    out.write(vectors[block[0] : block[-1] + 1])  # type: ignore[call-overload]
                else:
                    out.write(vectors[block])
        out.flush()
        os.fsync(out.fileno())


def _read(
    model: str, path: Path, dimension: int, *, after: int, kept: int
) -> tuple[np.ndarray | None, int, np.ndarray, np.ndarray]:
    """Write vec0's vectors above unit id ``after`` to ``path`` as unit-length rows, in the order read.

    Returns every unit id in vec0, or None when there are exactly ``kept`` (the previous copy's
    live rows) plus the new ones, i.e. nothing was deleted; how many there are; then the ids and
    the collection ids of the rows written. A few new rows of a large table are looked up by
    key (``LOOKUP_COST``); more are read by one step through the table.
    """
    search = ChunkSearch.search
    new = search.unit_ids(model=model, after=after)
    live: np.ndarray | None
    if not after:  # a full read: the new ids are all of them
        live, stored = new, new.size
    else:
        stored = search.unit_count(model=model)
        live = None if stored == kept + new.size else search.unit_ids(model=model)
    batches = (
        search.vector_batches(model=model, ids=np.sort(new))
        if new.size * LOOKUP_COST < stored
        else search.vector_batches(model=model, after=after)
    )
    ids, collections = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
    with open(path, "wb") as out:
        for batch in batches:
            if not batch:
                continue
            block = np.frombuffer(b"".join(row[2] for row in batch), dtype=np.float32).reshape(len(batch), -1)
            if block.shape[1] != dimension:
                raise DenseIndexError(
                    f"{vectorstore.table_name(model)} returned {block.shape[1]}-d vectors, expected {dimension}"
                )
            norms = np.linalg.norm(block, axis=1, keepdims=True)
            out.write(np.divide(block, norms, out=np.zeros_like(block), where=norms > 0).tobytes())
            ids.append(np.fromiter((row[0] for row in batch), dtype=np.int64, count=len(batch)))
            collections.append(
                np.fromiter((-1 if row[1] is None else row[1] for row in batch), dtype=np.int64, count=len(batch))
            )
    return live, stored, np.concatenate(ids), np.concatenate(collections)


def _map(path: Path, rows: int, dimension: int) -> np.ndarray:
    # numpy cannot map an empty file
    return (
        np.memmap(path, dtype=np.float32, mode="r", shape=(rows, dimension))
        if rows
        else np.zeros((0, dimension), np.float32)
    )


def _open(folder: Path) -> DenseMatrix:
    try:
        meta = json.loads((folder / "meta.json").read_text())
        rows, dimension = int(meta["rows"]), int(meta["dimension"])
        ids = np.load(folder / "ids.npy")
        collections = np.load(folder / "collections.npy")
        vectors = _map(folder / "vectors.f32", rows, dimension)
        signs = np.load(folder / "signs.npy", mmap_mode="r") if rows else np.zeros((0, 0), np.uint64)
    except FileNotFoundError:
        raise
    except (OSError, ValueError, KeyError) as exc:
        raise DenseIndexError(f"cannot read the dense matrix in {folder}: {exc}") from exc
    words = sign_word_count(dimension) if rows else 0
    if ids.shape != (rows,) or collections.shape != (rows,) or signs.shape != (words, rows):
        raise DenseIndexError(
            f"the dense matrix in {folder} is inconsistent: {rows} vectors, "
            f"{ids.size} ids, {collections.size} collection ids, sign bits of shape {signs.shape} "
            f"(expected {(words, rows)})"
        )
    live = collections != DEAD
    return DenseMatrix(
        folder=folder,
        version=meta["version"],
        ids=ids,
        collections=collections,
        vectors=vectors,
        signs=signs,
        live=None if live.all() else live,
    )
