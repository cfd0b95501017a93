"""The memory-mapped dense matrix answers exactly like vec0, and is never stale."""

from __future__ import annotations

import json
import logging
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from django.db import connection

from core import llm
from retrieval import dense, dense_matrix
from retrieval.models import ChunkSearch
from retrieval.search import ChunkSearchManager
from retrieval.services.retrieve import retrieve
from sources import vectorstore
from sources.models import Chunk, Collection, Source
from sources.services.ingest import source_delete
from sources.services.ingest_jobs import knowledge_base_ingest

TINY = "test/tiny-embedder"
MINILM = "local/all-minilm-l6-v2"


@pytest.fixture(autouse=True)
def _fresh_process_cache() -> None:
    dense._loaded.clear()


def _source_with_vectors(collection: Collection, name: str, vectors: np.ndarray) -> list[int]:
    source = Source.objects.create(
        collection=collection,
        root="/t",
        path=name,
        status=Source.Status.INGESTED,
        chunk_count=len(vectors),
        embedding_model=TINY,
    )
    chunks = Chunk.objects.bulk_create(
        [
            Chunk(source=source, ordinal=i, text=f"{name} {i}", line_start=1, line_end=1, token_count=2)
            for i in range(len(vectors))
        ]
    )
    vectorstore.ensure_table(TINY, vectors.shape[1])
    vectorstore.vectors_insert(TINY, [(c.pk, collection.pk, v.tolist()) for c, v in zip(chunks, vectors)])
    return [c.pk for c in chunks]


def _source_with_windows(
    collection: Collection, name: str, vectors: np.ndarray, windows: list[np.ndarray]
) -> list[int]:
    """As ``_source_with_vectors``, plus ``windows[i]`` (rows) as the window vectors of chunk i."""
    ids = _source_with_vectors(collection, name, vectors)
    vectorstore.ensure_windows_table(TINY, vectors.shape[1])
    vectorstore.windows_insert(
        TINY,
        [
            (vectorstore.window_id(cid, j), collection.pk, row.tolist())
            for cid, rows in zip(ids, windows)
            for j, row in enumerate(rows)
        ],
    )
    return ids


def _best_of_rows(query: np.ndarray, rows: dict[int, list[np.ndarray]], k: int) -> list[tuple[int, float]]:
    """Counted another way: each chunk's best cosine over its vector and its windows', best k."""
    best = {
        cid: max(float(v @ query / np.linalg.norm(v) / np.linalg.norm(query)) for v in vs) for cid, vs in rows.items()
    }
    return sorted(best.items(), key=lambda item: (-item[1], item[0]))[:k]


@pytest.mark.django_db
def test_a_chunk_is_found_by_its_best_window_in_the_matrix_and_in_vec0() -> None:
    rng = np.random.default_rng(17)
    collections = [Collection.objects.create(name=n) for n in ("alpha", "beta")]
    rows: dict[int, list[np.ndarray]] = {}
    for number, collection in enumerate(collections):
        vectors = rng.standard_normal((60, 16)).astype(np.float32)
        windows = [rng.standard_normal((int(n), 16)).astype(np.float32) for n in rng.integers(0, 4, 60)]
        ids = _source_with_windows(collection, f"doc{number}.md", vectors, windows)
        for cid, vector, extra in zip(ids, vectors, windows):
            rows[cid] = [vector, *extra]
    alpha_ids = set(Chunk.objects.filter(source__collection=collections[0]).values_list("pk", flat=True))
    for query in rng.standard_normal((10, 16)).astype(np.float32):
        for k in (1, 5, 20, 120):
            expected = _best_of_rows(query, rows, k)
            got = dense.nearest(query.tolist(), model=TINY, k=k)
            assert [h.chunk_id for h in got] == [cid for cid, _ in expected]
            assert np.allclose([h.score for h in got], [score for _, score in expected], atol=1e-5)
            if k <= 20:  # vec0 fetches 8 windows per chunk asked for: exact while a chunk has at most 8
                vec0 = ChunkSearch.search.nearest(query.tolist(), model=TINY, k=k)
                assert [h.chunk_id for h in vec0] == [cid for cid, _ in expected]
        scoped = dense.nearest(query.tolist(), model=TINY, k=20, collection_ids=[collections[0].pk])
        assert [h.chunk_id for h in scoped] == [
            cid for cid, _ in _best_of_rows(query, {cid: vs for cid, vs in rows.items() if cid in alpha_ids}, 20)
        ]
    assert len(dense.nearest([1.0] * 16, model=TINY, k=500)) == 120


@pytest.mark.django_db
def test_refresh_with_windows_reads_only_the_new_rows_and_matches_a_full_build(vectors_read: list[int]) -> None:
    rng = np.random.default_rng(18)
    alpha = Collection.objects.create(name="alpha")
    _source_with_windows(
        alpha,
        "a.md",
        rng.standard_normal((30, 16)).astype(np.float32),
        [rng.standard_normal((2, 16)).astype(np.float32)] * 30,
    )
    dense.current(TINY)
    _source_with_windows(
        alpha,
        "b.md",
        rng.standard_normal((4, 16)).astype(np.float32),
        [rng.standard_normal((3, 16)).astype(np.float32)] * 4,
    )
    source_delete(source_id=Source.objects.get(path="a.md").pk)
    matrix, built = dense.current(TINY)
    assert built and vectors_read == [90, 16] and len(matrix.ids) == 16
    assert vectorstore.window_count(TINY) == 12
    _assert_same_as_a_full_build(TINY)


@pytest.fixture(params=["scan", "lookups"])
def vectors_read(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The number of vectors each vec0 read of a build returned. Each test runs twice: reading
    new rows by one step through vec0 (as these small tables always do), and by key lookups (as
    a few rows of a large table are read)."""
    real, counts, lookups = ChunkSearchManager.vector_batches, [], []
    if request.param == "lookups":
        monkeypatch.setattr(dense, "LOOKUP_COST", 0)

    def counting(self: ChunkSearchManager, **kwargs: object) -> Iterator[list[tuple[int, int | None, bytes | None]]]:
        counts.append(0)
        ids = kwargs.get("ids")
        if ids is None or len(ids):  # nothing to look up is no read
            lookups.append(ids is not None)
        for batch in real(self, **kwargs):
            counts[-1] += len(batch)
            yield batch

    monkeypatch.setattr(ChunkSearchManager, "vector_batches", counting)
    yield counts
    assert (True in lookups) == (request.param == "lookups")


@pytest.fixture
def ids_read(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many unit ids each ``unit_ids`` call of a build returned."""
    real, counts = ChunkSearchManager.unit_ids, []

    def counting(self: ChunkSearchManager, **kwargs: object) -> np.ndarray:
        ids = real(self, **kwargs)
        counts.append(len(ids))
        return ids

    monkeypatch.setattr(ChunkSearchManager, "unit_ids", counting)
    return counts


def _live_rows(matrix: dense_matrix.DenseMatrix) -> dict[str, bytes]:
    """What a copy holds for search: its live rows' vectors, sign bits, ids and collections, in row order."""
    live = np.ones(matrix.ids.size, bool) if matrix.live is None else matrix.live
    return {
        "vectors": np.asarray(matrix.vectors[live]).tobytes(),
        "signs": np.asarray(matrix.signs[:, live]).tobytes(),
        "ids": matrix.ids[live].tobytes(),
        "collections": matrix.collections[live].tobytes(),
    }


def _assert_same_as_a_full_build(model: str) -> None:
    """The current copy's live rows are byte for byte what a build from no previous copy writes, and
    that build writes exactly its rows, none dead."""
    matrix, _ = dense.current(model)
    refreshed = _live_rows(matrix)
    shutil.rmtree(dense.root_folder(model))
    dense._loaded.clear()
    full, built = dense.current(model)
    assert built and full.folder == matrix.folder and full.live is None
    assert [name for name, data in _live_rows(full).items() if data != refreshed[name]] == []
    assert len(full.ids) == vectorstore.vector_count(model) + vectorstore.window_count(model)
    assert (full.folder / "vectors.f32").stat().st_size == full.vectors.nbytes


def _assert_search_same_as_vec0(model: str, queries: np.ndarray, scopes: list[list[int] | None]) -> None:
    for query in queries:
        for scope in scopes:
            expected = ChunkSearch.search.nearest(query.tolist(), model=model, k=50, collection_ids=scope)
            got = dense.nearest(query.tolist(), model=model, k=50, collection_ids=scope)
            assert [h.chunk_id for h in got] == [h.chunk_id for h in expected], scope
            assert np.allclose([h.score for h in got], [h.score for h in expected], atol=1e-5)


def _tiny_index(rng: np.random.Generator) -> list[Collection]:
    collections = [Collection.objects.create(name=n) for n in ("alpha", "beta", "gamma")]
    for number, collection in enumerate(collections):
        # unnormalised rows on purpose: cosine must not depend on stored lengths
        vectors = rng.standard_normal((120, 16)).astype(np.float32) * rng.uniform(0.1, 5, (120, 1)).astype(np.float32)
        _source_with_vectors(collection, f"doc{number}.md", vectors)
    return collections


@pytest.mark.django_db
def test_matrix_returns_the_same_chunks_order_and_scores_as_vec0() -> None:
    rng = np.random.default_rng(7)
    alpha, beta, gamma = (c.pk for c in _tiny_index(rng))
    for query in rng.standard_normal((12, 16)).astype(np.float32):
        for scope in (None, [alpha], [alpha, gamma], [beta, 999_999]):
            for k in (1, 10, 50, 500):
                expected = ChunkSearch.search.nearest(query.tolist(), model=TINY, k=k, collection_ids=scope)
                got = dense.nearest(query.tolist(), model=TINY, k=k, collection_ids=scope)
                assert [h.chunk_id for h in got] == [h.chunk_id for h in expected], (scope, k)
                assert np.allclose([h.score for h in got], [h.score for h in expected], atol=1e-5)
    assert len(dense.nearest([1.0] * 16, model=TINY, k=500)) == 360
    assert dense.nearest([1.0] * 16, model=TINY, k=5, collection_ids=[]) == []


def test_sign_words_pack_one_bit_per_dimension_padded_to_whole_words() -> None:
    vectors = np.zeros((2, 70), np.float32)
    vectors[0, [0, 7, 64, 69]] = 1.0
    vectors[1, :] = -0.5
    vectors[1, 8] = 2.0
    words = dense_matrix.sign_words(vectors)
    assert words.shape == (2, 2) and words.dtype == np.uint64
    bits = np.unpackbits(words.view(np.uint8), axis=1)  # bytes back to bits, in packing order
    assert np.flatnonzero(bits[0]).tolist() == [0, 7, 64, 69]
    assert np.flatnonzero(bits[1]).tolist() == [8]  # 0 and negative give 0; the padding stays 0


def test_contained_is_isin_for_any_order_duplicates_and_an_empty_pool() -> None:
    rng = np.random.default_rng(3)
    pool = rng.integers(0, 50, 40)
    values = rng.integers(-5, 60, 200)
    assert dense_matrix.contained(values, pool).tolist() == np.isin(values, pool).tolist()
    assert dense_matrix.contained(values, np.zeros(0, np.int64)).tolist() == [False] * 200
    assert dense_matrix.contained(np.zeros(0, np.int64), pool).tolist() == []


def _expected_with_shortlist(
    query: np.ndarray, vectors: np.ndarray, ids: np.ndarray, allowed: np.ndarray, size: int, k: int
) -> list[int]:
    """Counted another way: sign mismatches per row, the shortlist with its ties, exact cosine within it."""
    mismatches = ((vectors > 0) != (query > 0)).sum(axis=1)
    mismatches = np.where(allowed, mismatches, vectors.shape[1] + 1)
    cut = np.sort(mismatches)[size - 1]
    rows = np.flatnonzero(mismatches <= cut)
    cosine = vectors[rows] @ query / np.linalg.norm(vectors[rows], axis=1) / np.linalg.norm(query)
    best = sorted(zip(-cosine, ids[rows]))[:k]
    return [int(chunk_id) for _, chunk_id in best]


@pytest.mark.django_db
def test_shortlist_scores_exactly_the_rows_nearest_in_sign_bits() -> None:
    rng = np.random.default_rng(11)
    alpha, beta, gamma = (c.pk for c in _tiny_index(rng))
    rows = sorted(ChunkSearch.search.vectors(list(Chunk.objects.values_list("pk", flat=True)), model=TINY).items())
    ids = np.array([chunk_id for chunk_id, _ in rows])
    vectors = np.array([np.frombuffer(blob, np.float32) for _, blob in rows])
    collection = np.array(list(Chunk.objects.order_by("pk").values_list("source__collection", flat=True)))
    missed = 0
    for query in rng.standard_normal((8, 16)).astype(np.float32):
        for scope in (None, [alpha], [beta, gamma]):
            allowed = np.ones(len(ids), bool) if scope is None else np.isin(collection, scope)
            for size, k in ((30, 10), (5, 5), (60, 50)):
                got = dense.nearest(query.tolist(), model=TINY, k=k, collection_ids=scope, shortlist=size)
                assert [h.chunk_id for h in got] == _expected_with_shortlist(
                    query, vectors, ids, allowed, max(size, k), k
                ), (scope, size, k)
                by_id = dict(zip(ids.tolist(), vectors))
                assert [h.score for h in got] == pytest.approx(
                    [
                        float(by_id[h.chunk_id] @ query / np.linalg.norm(by_id[h.chunk_id]) / np.linalg.norm(query))
                        for h in got
                    ],
                    abs=1e-5,
                )
                exact = dense.nearest(query.tolist(), model=TINY, k=k, collection_ids=scope)
                missed += len({h.chunk_id for h in exact} - {h.chunk_id for h in got})
    assert missed > 0  # 16 random dimensions are a poor filter: the shortlist path really ran


@pytest.mark.django_db
def test_shortlist_as_large_as_the_scope_is_the_exact_search() -> None:
    rng = np.random.default_rng(12)
    alpha, *_ = (c.pk for c in _tiny_index(rng))
    for query in rng.standard_normal((4, 16)).astype(np.float32):
        for scope, size in ((None, 360), (None, 5000), ([alpha], 120), ([alpha], 5000)):
            for k in (1, 10, 500):
                exact = dense.nearest(query.tolist(), model=TINY, k=k, collection_ids=scope)
                got = dense.nearest(query.tolist(), model=TINY, k=k, collection_ids=scope, shortlist=size)
                assert got == exact


@pytest.mark.django_db
def test_retrieve_shortlists_only_above_dense_exact_max_rows(
    kb: Path, foundry_config, monkeypatch: pytest.MonkeyPatch
) -> None:
    for number in range(60):
        (kb / f"part{number}.md").write_text(f"# Part {number}\n\nPart {number} is rated for {number * 7} bar.\n")
    knowledge_base_ingest(target=kb)
    real, sizes = dense_matrix.DenseMatrix._shortlist, []

    def counting(
        self: dense_matrix.DenseMatrix, query: np.ndarray, size: int, allowed: np.ndarray | None
    ) -> np.ndarray:
        sizes.append(size)
        return real(self, query, size, allowed)

    monkeypatch.setattr(dense_matrix.DenseMatrix, "_shortlist", counting)
    exact = retrieve(question="which part is rated for 14 bar", collection_ids=None, mode="dense", top_k=2)
    assert sizes == []  # 60 vectors: under the default dense_exact_max_rows
    foundry_config(retrieval={"dense_exact_max_rows": 59, "dense_shortlist": 3})
    shortlisted = retrieve(question="which part is rated for 14 bar", collection_ids=None, mode="dense", top_k=2)
    assert sizes == [50]  # never fewer than the channel's depth (50 here): it still returns 50 hits
    assert len(shortlisted.channels["dense"]) == 50
    assert shortlisted.channels["dense"][0] == exact.channels["dense"][0]


@pytest.mark.django_db
def test_collection_scope_uses_the_vector_rows_collection() -> None:
    rng = np.random.default_rng(1)
    alpha, beta, _ = (c.pk for c in _tiny_index(rng))
    hits = dense.nearest(rng.standard_normal(16).tolist(), model=TINY, k=1000, collection_ids=[beta])
    assert len(hits) == 120
    assert set(
        Chunk.objects.filter(pk__in=[h.chunk_id for h in hits]).values_list("source__collection", flat=True)
    ) == {beta}
    assert not dense.nearest(rng.standard_normal(16).tolist(), model=TINY, k=5, collection_ids=[123_456])


@pytest.mark.django_db
def test_missing_table_is_the_usual_missing_embeddings_error() -> None:
    with pytest.raises(vectorstore.MissingEmbeddings):
        dense.nearest([0.0] * 16, model="test/never-ingested", k=5)


@pytest.mark.django_db
def test_wrong_query_width_names_the_matrix() -> None:
    _tiny_index(np.random.default_rng(2))
    with pytest.raises(dense_matrix.DenseIndexError, match="query vector has 8 dimensions .* 16-d"):
        dense.nearest([0.5] * 8, model=TINY, k=5)


@pytest.mark.django_db
def test_matrix_follows_ingest_replacement_and_deletion(kb: Path) -> None:
    (kb / "pump.md").write_text("# Pump\n\nThe centrifugal pump delivers 40 litres per minute.\n")
    knowledge_base_ingest(target=kb)
    query = llm.embed(["pressure relief valve"], model=MINILM)[0]

    def same_as_vec0() -> list[int]:
        got = [h.chunk_id for h in dense.nearest(query, model=MINILM, k=10)]
        assert got == [h.chunk_id for h in ChunkSearch.search.nearest(query, model=MINILM, k=10)]
        return got

    assert same_as_vec0() == list(Chunk.objects.values_list("pk", flat=True))
    (kb / "valve.md").write_text("# Valve\n\nThe relief valve opens at 6 bar of pressure.\n")
    knowledge_base_ingest(target=kb)
    valve = Chunk.objects.get(source__path="valve.md").pk
    assert same_as_vec0()[0] == valve
    (kb / "valve.md").write_text("# Valve\n\nThe pressure relief valve opens at 7 bar.\n")
    knowledge_base_ingest(target=kb)
    replaced = same_as_vec0()
    assert valve not in replaced and replaced[0] == Chunk.objects.get(source__path="valve.md").pk
    source_delete(source_id=Source.objects.get(path="valve.md").pk)
    assert same_as_vec0() == list(Chunk.objects.values_list("pk", flat=True))
    versions = [p for p in dense.root_folder(MINILM).iterdir() if p.is_dir()]
    assert len(versions) == 1, "older copies are removed after a rebuild"


@pytest.mark.django_db
def test_refresh_after_appending_reads_only_the_new_vectors(vectors_read: list[int], ids_read: list[int]) -> None:
    rng = np.random.default_rng(8)
    alpha, beta, gamma = _tiny_index(rng)
    dense.current(TINY)
    _source_with_vectors(beta, "late.md", rng.standard_normal((3, 16)).astype(np.float32))
    matrix, built = dense.current(TINY)
    assert built and vectors_read == [360, 3] and len(matrix.ids) == 363
    assert ids_read == [360, 3], "nothing was deleted: only the new ids are read, the others counted"
    _assert_search_same_as_vec0(
        TINY, rng.standard_normal((5, 16)).astype(np.float32), [None, [beta.pk], [alpha.pk, gamma.pk]]
    )
    _assert_same_as_a_full_build(TINY)


@pytest.mark.django_db
def test_refresh_after_deleting_a_source_and_appending_in_its_place(
    vectors_read: list[int], ids_read: list[int]
) -> None:
    rng = np.random.default_rng(9)
    alpha, beta, gamma = _tiny_index(rng)
    dense.current(TINY)
    source_delete(source_id=Source.objects.get(path="doc1.md").pk)
    matrix, built = dense.current(TINY)
    assert built and vectors_read == [360, 0] and len(matrix.ids) == 240
    assert ids_read == [360, 0, 240], "rows were deleted: every id is read to find which"
    _source_with_vectors(gamma, "late.md", rng.standard_normal((5, 16)).astype(np.float32))
    matrix, built = dense.current(TINY)
    assert built and vectors_read == [360, 0, 5] and len(matrix.ids) == 245
    assert ids_read == [360, 0, 240, 5]
    scan = [row[0] for batch in ChunkSearch.search.vector_batches(model=TINY) for row in batch]
    if connection.vendor == "sqlite":  # a PostgreSQL heap may or may not reuse the space: either order is fine
        assert scan != sorted(scan), "vec0 put the new rows into the freed slots: its order is not chunk id order"
    _assert_search_same_as_vec0(
        TINY, rng.standard_normal((5, 16)).astype(np.float32), [None, [beta.pk], [alpha.pk, gamma.pk]]
    )
    _assert_same_as_a_full_build(TINY)


@pytest.mark.django_db
def test_refresh_follows_a_changed_file_and_a_move_to_another_collection(kb: Path, vectors_read: list[int]) -> None:
    (kb / "pump.md").write_text("# Pump\n\nThe centrifugal pump delivers 40 litres per minute.\n")
    (kb / "valve.md").write_text("# Valve\n\nThe relief valve opens at 6 bar of pressure.\n")
    knowledge_base_ingest(target=kb)
    dense.current(MINILM)
    queries = np.asarray(llm.embed(["pressure relief valve", "how much does the pump deliver"], model=MINILM))
    (kb / "valve.md").write_text(
        "# Valve\n\nThe pressure relief valve opens at 7 bar.\n\n## Testing\n\nTest the valve once a year.\n"
    )
    knowledge_base_ingest(target=kb)
    valve = list(Chunk.objects.filter(source__path="valve.md").values_list("pk", flat=True))
    matrix, built = dense.current(MINILM)
    assert built and vectors_read[-1] == len(valve)
    assert set(valve) <= set((matrix.ids // vectorstore.WINDOW_SLOTS).tolist())
    _assert_search_same_as_vec0(MINILM, queries, [None])
    _assert_same_as_a_full_build(MINILM)

    knowledge_base_ingest(target=kb / "valve.md", collection="archive", move=True)
    archive, first = Collection.objects.get(name="archive").pk, Source.objects.get(path="pump.md").collection_id
    matrix, built = dense.current(MINILM)
    assert built and vectors_read[-1] == len(valve)
    assert set(matrix.collections.tolist()) == {archive, first}
    _assert_search_same_as_vec0(MINILM, queries, [None, [archive], [first]])
    _assert_same_as_a_full_build(MINILM)


@pytest.mark.django_db
def test_unit_ids_and_count_are_the_ids_vec0_holds_after_inserts_and_deletions() -> None:
    rng = np.random.default_rng(14)
    alpha = Collection.objects.create(name="alpha")

    def through_vec0() -> list[int]:
        with connection.cursor() as cur:
            cur.execute(
                f"SELECT chunk_id * {vectorstore.WINDOW_SLOTS} FROM {vectorstore.table_name(TINY)} "
                f"UNION ALL SELECT window_id FROM {vectorstore.windows_table_name(TINY)}"
            )
            return sorted(row[0] for row in cur.fetchall())

    def unit_ids(after: int = 0) -> list[int]:
        return sorted(ChunkSearch.search.unit_ids(model=TINY, after=after).tolist())

    def check(count: int) -> None:
        everything = through_vec0()
        assert unit_ids() == everything and len(everything) == count == ChunkSearch.search.unit_count(model=TINY)
        for after in (everything[0], everything[7], everything[7] + 1, everything[-1]):  # chunks' and windows' ids
            assert unit_ids(after) == [unit for unit in everything if unit > after], after

    for name in ("a.md", "b.md", "c.md"):
        _source_with_windows(
            alpha,
            name,
            rng.standard_normal((5, 16)).astype(np.float32),
            [rng.standard_normal((3, 16)).astype(np.float32)] * 5,
        )
    check(60)
    source_delete(source_id=Source.objects.get(path="b.md").pk)
    _source_with_vectors(alpha, "d.md", rng.standard_normal((2, 16)).astype(np.float32))
    check(42)


def _file(matrix: dense_matrix.DenseMatrix) -> int:
    return (matrix.folder / "vectors.f32").stat().st_ino


@pytest.mark.django_db
def test_refresh_appends_to_the_same_file_and_an_older_view_still_answers(vectors_read: list[int]) -> None:
    rng = np.random.default_rng(11)
    alpha, beta, gamma = _tiny_index(rng)
    old, _ = dense.current(TINY)
    queries = rng.standard_normal((5, 16)).astype(np.float32)
    before, inode = [[h.chunk_id for h in old.search(q, k=20, collection_ids=None)] for q in queries], _file(old)
    _source_with_vectors(beta, "late.md", rng.standard_normal((60, 16)).astype(np.float32))
    matrix, built = dense.current(TINY)
    assert built and vectors_read == [360, 60] and _file(matrix) == inode and matrix.live is None
    assert not old.folder.exists(), "the older copy's folder is removed; its file lives on in the new one"
    assert [[h.chunk_id for h in old.search(q, k=20, collection_ids=None)] for q in queries] == before
    _assert_search_same_as_vec0(TINY, queries, [None, [beta.pk]])
    _assert_same_as_a_full_build(TINY)


@pytest.mark.django_db
def test_deleted_rows_stay_in_the_file_as_dead_until_they_pass_the_compaction_share(vectors_read: list[int]) -> None:
    rng = np.random.default_rng(12)
    alpha, beta, gamma = _tiny_index(rng)
    late = set(_source_with_vectors(beta, "late.md", rng.standard_normal((60, 16)).astype(np.float32)))
    inode = _file(dense.current(TINY)[0])
    source_delete(source_id=Source.objects.get(path="late.md").pk)  # 60 of 420 rows: 14 %
    matrix, built = dense.current(TINY)
    assert built and vectors_read == [420, 0] and _file(matrix) == inode
    assert len(matrix.ids) == 420 and int((~matrix.live).sum()) == 60
    assert set(matrix.collections[~matrix.live].tolist()) == {dense_matrix.DEAD}
    queries = rng.standard_normal((5, 16)).astype(np.float32)
    _assert_search_same_as_vec0(TINY, queries, [None, [beta.pk], [alpha.pk, gamma.pk]])
    for shortlist in (0, 50, 1000):  # the exact scan, the sign-bit shortlist, and a shortlist wider than the rows
        for scope, rows in ((None, 360), ([beta.pk], 120)):
            assert len(matrix.search(queries[0], k=500, collection_ids=scope, shortlist=shortlist)) == rows
            for query in queries:
                assert not late & {
                    h.chunk_id for h in matrix.search(query, k=20, collection_ids=scope, shortlist=shortlist)
                }
    _source_with_vectors(gamma, "later.md", rng.standard_normal((5, 16)).astype(np.float32))
    matrix, built = dense.current(TINY)
    assert built and vectors_read[-1] == 5 and len(matrix.ids) == 425 and int((~matrix.live).sum()) == 60
    _assert_search_same_as_vec0(TINY, queries, [None, [gamma.pk]])
    appended = _file(matrix)
    source_delete(source_id=Source.objects.get(path="doc0.md").pk)  # 180 of 425 dead: a new file
    matrix, built = dense.current(TINY)
    assert built and vectors_read[-1] == 0 and matrix.live is None and len(matrix.ids) == 245
    assert _file(matrix) != appended
    _assert_search_same_as_vec0(TINY, queries, [None, [alpha.pk], [gamma.pk]])
    _assert_same_as_a_full_build(TINY)


@pytest.mark.django_db
def test_without_hard_links_a_refresh_writes_a_new_file_and_says_so(
    vectors_read: list[int], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    rng = np.random.default_rng(15)
    alpha, *_ = _tiny_index(rng)
    inode = _file(dense.current(TINY)[0])
    _source_with_vectors(alpha, "late.md", rng.standard_normal((3, 16)).astype(np.float32))

    def no_links(source: object, target: object) -> None:
        raise OSError(1, "Operation not permitted")

    monkeypatch.setattr(dense.os, "link", no_links)
    with caplog.at_level(logging.WARNING, logger="retrieval.dense"):
        matrix, built = dense.current(TINY)
    assert built and vectors_read == [360, 3] and _file(matrix) != inode and "cannot hard-link" in caplog.text
    _assert_search_same_as_vec0(TINY, rng.standard_normal((5, 16)).astype(np.float32), [None, [alpha.pk]])
    _assert_same_as_a_full_build(TINY)


@pytest.mark.django_db
def test_bytes_past_the_rows_a_copy_names_are_cut_off_before_the_next_append(vectors_read: list[int]) -> None:
    rng = np.random.default_rng(13)
    alpha, *_ = _tiny_index(rng)
    matrix, _ = dense.current(TINY)
    with open(matrix.folder / "vectors.f32", "ab") as handle:  # an append whose build died before its rename
        handle.write(np.full((7, 16), 9.0, np.float32).tobytes())
    dense._loaded.clear()
    assert [h.chunk_id for h in dense.nearest([1.0] * 16, model=TINY, k=20)] == [
        h.chunk_id for h in ChunkSearch.search.nearest([1.0] * 16, model=TINY, k=20)
    ]
    _source_with_vectors(alpha, "late.md", rng.standard_normal((3, 16)).astype(np.float32))
    matrix, built = dense.current(TINY)
    assert built and vectors_read == [360, 3] and (matrix.folder / "vectors.f32").stat().st_size == 363 * 16 * 4
    _assert_search_same_as_vec0(TINY, rng.standard_normal((5, 16)).astype(np.float32), [None, [alpha.pk]])
    _assert_same_as_a_full_build(TINY)


def _damage(folder: Path, how: str) -> None:
    if how == "vectors cut short":
        (folder / "vectors.f32").write_bytes((folder / "vectors.f32").read_bytes()[:-64])
    elif how == "ids missing":
        (folder / "ids.npy").unlink()
    elif how == "signs missing":  # as in a copy written before sign bits existed
        (folder / "signs.npy").unlink()
    elif how == "signs of another width":
        np.save(folder / "signs.npy", np.load(folder / "signs.npy")[:0])
    elif how == "another width":
        meta = json.loads((folder / "meta.json").read_text())
        (folder / "meta.json").write_text(json.dumps({**meta, "dimension": 8}))
    else:  # the files are consistent, but their ids are not vec0's
        ids = np.load(folder / "ids.npy")
        ids[1] = ids[0] if how == "an id listed twice" else -7
        np.save(folder / "ids.npy", ids)


@pytest.mark.django_db
@pytest.mark.parametrize(
    "how",
    [
        "vectors cut short",
        "ids missing",
        "signs missing",
        "signs of another width",
        "another width",
        "an id listed twice",
        "an id replaced",
    ],
)
def test_damaged_previous_copy_leads_to_a_full_build(
    how: str, vectors_read: list[int], caplog: pytest.LogCaptureFixture
) -> None:
    rng = np.random.default_rng(10)
    alpha, beta, _ = _tiny_index(rng)
    previous, _ = dense.current(TINY)
    _damage(previous.folder, how)
    _source_with_vectors(alpha, "late.md", rng.standard_normal((3, 16)).astype(np.float32))
    with caplog.at_level(logging.WARNING, logger="retrieval.dense"):
        matrix, built = dense.current(TINY)
    assert built and vectors_read[-1] == 363 and len(matrix.ids) == 363
    assert "reading every vector" in caplog.text
    _assert_search_same_as_vec0(TINY, rng.standard_normal((5, 16)).astype(np.float32), [None, [beta.pk]])
    _assert_same_as_a_full_build(TINY)


@pytest.mark.django_db
def test_retrieve_uses_the_matrix_and_reports_a_build(kb: Path, foundry_config) -> None:
    (kb / "a.md").write_text("# Pump\n\nThe centrifugal pump delivers 40 litres per minute.\n")
    (kb / "b.md").write_text("# Valve\n\nThe relief valve opens at 6 bar of pressure.\n")
    knowledge_base_ingest(target=kb)
    first = retrieve(question="when does the relief valve open", collection_ids=None, mode="dense")
    assert "dense_index_build" in first.timings
    second = retrieve(question="when does the relief valve open", collection_ids=None, mode="dense")
    assert "dense_index_build" not in second.timings
    (kb / "c.md").write_text("# Gauge\n\nThe pressure gauge reads up to 10 bar.\n")
    knowledge_base_ingest(target=kb)
    refreshed = retrieve(question="when does the relief valve open", collection_ids=None, mode="dense")
    assert "dense_index_build" in refreshed.timings
    foundry_config(retrieval={"dense_index": "vec0"})
    plain = retrieve(question="when does the relief valve open", collection_ids=None, mode="hybrid")
    assert "dense_index_build" not in plain.timings
    foundry_config(retrieval={"dense_index": "matrix"})
    fast = retrieve(question="when does the relief valve open", collection_ids=None, mode="hybrid")
    assert [h.chunk_id for h in fast.channels["dense"]] == [h.chunk_id for h in plain.channels["dense"]]
    assert [h.score for h in fast.channels["dense"]] == pytest.approx(
        [h.score for h in plain.channels["dense"]], abs=1e-5
    )
    assert [c.chunk.pk for c in fast.candidates] == [c.chunk.pk for c in plain.candidates]


@pytest.mark.django_db
def test_ingest_during_the_read_makes_the_build_read_again(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(3)
    (alpha, *_) = _tiny_index(rng)
    real_write, calls = dense._write, []

    def write_while_ingesting(model: str, staging: Path, base: dense_matrix.DenseMatrix | None) -> tuple[int, int, int]:
        result = real_write(model, staging, base)
        calls.append(staging)
        if len(calls) == 1:  # an ingest commits after our read: this copy must not be used
            _source_with_vectors(alpha, "late.md", rng.standard_normal((3, 16)).astype(np.float32))
        return result

    monkeypatch.setattr(dense, "_write", write_while_ingesting)
    matrix, built = dense.current(TINY)
    late = set(Chunk.objects.filter(source__path="late.md").values_list("pk", flat=True))
    assert built and len(calls) == 2
    assert late <= set((matrix.ids // vectorstore.WINDOW_SLOTS).tolist()) and len(matrix.ids) == 363
    assert matrix.version == vectorstore.vectors_version(TINY)
    assert not list(dense.root_folder(TINY).glob(".tmp-*"))


@pytest.mark.django_db
def test_leftover_of_a_crashed_build_is_ignored_and_removed() -> None:
    _tiny_index(np.random.default_rng(4))
    leftover = dense.root_folder(TINY) / ".tmp-crashed"
    leftover.mkdir(parents=True)
    (leftover / "vectors.f32").write_bytes(b"\0" * 10)
    assert len(dense.nearest([1.0] * 16, model=TINY, k=400)) == 360
    assert not leftover.exists()


@pytest.mark.django_db
def test_damaged_copy_is_a_clear_error_not_a_wrong_answer() -> None:
    _tiny_index(np.random.default_rng(5))
    matrix, _ = dense.current(TINY)
    np.save(matrix.folder / "ids.npy", matrix.ids[:-1])
    dense._loaded.clear()
    with pytest.raises(dense_matrix.DenseIndexError, match=r"inconsistent: 360 vectors, 359 ids"):
        dense.nearest([1.0] * 16, model=TINY, k=5)


@pytest.mark.django_db(transaction=True)
def test_concurrent_searches_build_the_copy_once(monkeypatch: pytest.MonkeyPatch) -> None:
    _tiny_index(np.random.default_rng(6))
    real_write, builds = dense._write, []

    def slow_write(model: str, staging: Path, base: dense_matrix.DenseMatrix | None) -> tuple[int, int, int]:
        builds.append(staging)
        threading.Event().wait(0.3)  # widen the window in which the others find no copy
        return real_write(model, staging, base)

    monkeypatch.setattr(dense, "_write", slow_write)
    results: list[object] = []

    def search() -> None:
        try:
            dense._loaded.clear()
            results.append([h.chunk_id for h in dense.nearest([1.0] * 16, model=TINY, k=20)])
        except Exception as exc:  # noqa: BLE001 - reported by the assertion below
            results.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=search) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    expected = [h.chunk_id for h in ChunkSearch.search.nearest([1.0] * 16, model=TINY, k=20)]
    assert results == [expected] * 4
    assert len(builds) == 1
    folders = [p for p in dense.root_folder(TINY).iterdir() if p.is_dir()]
    assert len(folders) == 1 and not folders[0].name.startswith(".tmp-")
