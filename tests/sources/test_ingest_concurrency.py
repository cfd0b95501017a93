"""Two db workers storing the same prepared file at once (two ``store_source`` tasks of one payload) leave it
stored once: one source row, and exactly one set of chunks, keyword rows and vectors. Both run real
transactions on their own connections, on either store (``FOUNDRY_TEST_STORE``): SQLite serialises them by
``BEGIN IMMEDIATE``, PostgreSQL by the source's row lock and its (root, path) unique constraint."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from sources import vectorstore
from sources.models import Chunk, Source
from sources.services import ingest, prepare
from sources.services.ingest import collection_get_or_create, source_store_prepared

MODEL = "local/all-minilm-l6-v2"


@pytest.mark.parametrize("stored_before", [False, True], ids=["new file", "changed file"])
def test_two_workers_storing_one_file_at_once_store_it_once(
    kb: Path, transactional_db: None, monkeypatch: pytest.MonkeyPatch, stored_before: bool
) -> None:
    root, rel = str(kb), "pump.md"
    collection = collection_get_or_create(name="default")
    # A flush between transactional tests empties Django's tables, not the vector tables (nor, on SQLite,
    # the keyword index): rows earlier tests left there are not this test's.
    left = _index_rows()
    if stored_before:
        (kb / rel).write_text("# Pump\n\nThe old pump delivered 20 litres per minute.\n")
        source_store_prepared(
            root=root, rel=rel, collection_id=collection.pk, payload=prepare.source_prepare(root=root, rel=rel)
        )
    (kb / rel).write_text(
        "# Pump\n\nThe centrifugal pump delivers 40 litres per minute. It runs on 24 V. It weighs 12 kg.\n\n"
        "## Service\n\nReplace the seal every year. Check the impeller for wear. Grease the bearing.\n"
    )
    payload = prepare.source_prepare(root=root, rel=rel)
    both_prepared = threading.Barrier(2, timeout=60)
    store = ingest._store

    def store_together(**kwargs: Any) -> Source:
        both_prepared.wait()  # both have passed the unchanged check: they race for the write
        return store(**kwargs)

    monkeypatch.setattr(ingest, "_store", store_together)
    results: list[Any] = []

    def worker() -> None:
        try:
            results.append(source_store_prepared(root=root, rel=rel, collection_id=collection.pk, payload=payload))
        except Exception as exc:  # recorded: the test fails on it below
            results.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert [r.status for r in results] == ["ingested", "ingested"], results
    source = Source.objects.get(root=root, path=rel)
    chunks = set(Chunk.objects.filter(source=source).values_list("id", flat=True))
    assert len(chunks) == source.chunk_count == len(payload["chunks"])
    assert Chunk.objects.count() == len(chunks)  # nothing of the other write, or of the old version, is left
    fts, vectors, windows = (now - before for now, before in zip(_index_rows(), left))
    assert fts == chunks and vectors == chunks
    assert {w // vectorstore.WINDOW_SLOTS for w in windows} <= chunks
    assert len(windows) == len(payload["window_owners"]) > 0


def _index_rows() -> tuple[set[int], set[int], set[int]]:
    """The chunk ids in the keyword index and the vector table, and the window ids of the windows table."""
    if not vectorstore.table_exists(MODEL):
        return vectorstore.fts_ids(), set(), set()
    return (
        vectorstore.fts_ids(),
        vectorstore.vector_ids(vectorstore.table_name(MODEL)),
        vectorstore.window_rows(vectorstore.windows_table_name(MODEL)),
    )
