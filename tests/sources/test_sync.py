"""Folders bound to collections: binding rules, the sync guards, and one job at a time."""

from __future__ import annotations

import os
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from sources.models import Chunk, Collection, IngestJob, Source
from sources.services import ingest_jobs
from sources.services.collections import CollectionError
from sources.services.sync import collection_bind, collection_unbind, collections_sync

pytestmark = pytest.mark.django_db


def foundry(*args: str) -> str:
    out = StringIO()
    call_command("foundry", *args, stdout=out)
    return out.getvalue()


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "pump.md").write_text("# Pump\n\nReplace the shaft seal every 4000 operating hours.\n")
    (folder / "notes.txt").write_text("The gateway needs 24 V DC.\n")
    return folder


def test_bind_creates_the_collection_and_stores_the_absolute_folder(
    docs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(docs.parent)
    coll = collection_bind(collection="manuals", folder=Path("docs"))
    assert coll.folder == str(docs) and Collection.objects.get(name="manuals").folder == str(docs)
    assert collection_bind(collection="manuals", folder=docs).folder == str(docs)  # binding again is harmless


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda root: root / "nowhere", "no such folder"),
        (lambda root: (root / "file.txt", (root / "file.txt").write_text("x"))[0], "not a folder"),
    ],
)
def test_bind_refuses_what_is_not_a_folder(tmp_path: Path, make: object, message: str) -> None:
    path = make(tmp_path)
    with pytest.raises(CollectionError, match=message):
        collection_bind(collection="manuals", folder=path)
    assert not Collection.objects.exists()  # no empty collection left behind


def test_bind_refuses_one_folder_for_two_collections_and_nested_folders(docs: Path) -> None:
    (docs / "sub").mkdir()
    collection_bind(collection="manuals", folder=docs)
    with pytest.raises(CollectionError, match=f"{docs} is already bound to collection 'manuals'"):
        collection_bind(collection="other", folder=docs)
    with pytest.raises(CollectionError, match="overlaps the folder of collection 'manuals'"):
        collection_bind(collection="other", folder=docs / "sub")
    with pytest.raises(CollectionError, match="overlaps the folder of collection 'manuals'"):
        collection_bind(collection="other", folder=docs.parent)
    link = docs.parent / "link"
    link.symlink_to(docs)
    with pytest.raises(CollectionError, match="is already bound to collection 'manuals'"):
        collection_bind(collection="other", folder=link)  # the same folder under another name
    assert not Collection.objects.filter(name="other").exists()
    (docs.parent / "docs2").mkdir()  # a sibling whose name starts the same is not inside it
    assert collection_bind(collection="other", folder=docs.parent / "docs2").folder.endswith("docs2")


def test_unbind_keeps_the_sources_and_refuses_an_unbound_collection(docs: Path) -> None:
    collection_bind(collection="manuals", folder=docs)
    collections_sync()
    collection_unbind(collection="manuals")
    assert Collection.objects.get(name="manuals").folder == ""
    assert Source.objects.filter(collection__name="manuals").count() == 2
    assert collections_sync() == []
    with pytest.raises(CollectionError, match="not bound to a folder"):
        collection_unbind(collection="manuals")
    with pytest.raises(CollectionError, match="no collection named 'ghost'"):
        collection_unbind(collection="ghost")


def test_sync_ingests_then_is_idempotent(docs: Path) -> None:
    collection_bind(collection="manuals", folder=docs)
    [first] = collections_sync()
    assert (first.status, first.counts["ingested"], first.counts["removed"]) == ("synced", 2, 0)
    [again] = collections_sync()
    assert (again.status, again.counts["ingested"], again.counts["unchanged"]) == ("synced", 0, 2)
    assert Source.objects.filter(collection__name="manuals", status="ingested").count() == 2
    assert Collection.objects.get(name="manuals").synced_at is not None


def test_missing_folder_fails_the_collection_and_keeps_its_sources(docs: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "a.txt").write_text("Valve V-2 opens at 3 bar.\n")
    collection_bind(collection="manuals", folder=docs)
    collection_bind(collection="valves", folder=other)
    collections_sync()
    chunks = Chunk.objects.count()
    docs.rename(tmp_path / "unmounted")
    results = {r.collection: r for r in collections_sync()}
    assert results["manuals"].status == "failed"
    assert f"bound folder {docs} is missing" in results["manuals"].reason
    assert "its 2 source(s) are kept" in results["manuals"].reason
    assert results["valves"].status == "synced"  # one failed folder does not stop the others
    assert Source.objects.filter(collection__name="manuals").count() == 2 and Chunk.objects.count() == chunks
    assert "is missing" in Collection.objects.get(name="manuals").sync_error


def test_empty_folder_of_an_unmounted_drive_removes_nothing(docs: Path) -> None:
    collection_bind(collection="manuals", folder=docs)
    collections_sync()
    for f in docs.iterdir():
        os.rename(f, docs.parent / f.name)  # the mount point stays, empty
    [result] = collections_sync()
    assert result.status == "failed" and f"bound folder {docs} is empty" in result.reason
    assert f"foundry ingest {docs} --collection manuals" in result.reason  # how to remove them on purpose
    assert Source.objects.filter(collection__name="manuals").count() == 2
    job = IngestJob.objects.get(pk=result.job_id)
    assert job.status == "failed" and "is empty" in job.error  # `foundry jobs` shows it too


def test_an_empty_folder_with_no_sources_yet_is_fine(tmp_path: Path) -> None:
    (tmp_path / "new").mkdir()
    collection_bind(collection="manuals", folder=tmp_path / "new")
    [result] = collections_sync()
    assert result.status == "synced" and result.counts["ingested"] == 0


def test_unreadable_folder_fails_and_keeps_its_sources(docs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    collection_bind(collection="manuals", folder=docs)
    collections_sync()
    real_scandir = os.scandir

    def scandir(path: object) -> object:  # as for a user without read permission (the tests may run as root)
        if Path(str(path)) == docs:
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr("sources.services.sync.os.scandir", scandir)
    [result] = collections_sync()
    assert result.status == "failed"
    assert result.reason.startswith(f"bound folder {docs} cannot be read (Permission denied); its 2 source(s) are kept")
    assert Source.objects.filter(collection__name="manuals").count() == 2


def test_an_unreadable_folder_inside_the_bound_one_removes_nothing(docs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (docs / "share").mkdir()
    (docs / "share" / "valve.txt").write_text("Valve V-2 opens at 3 bar.\n")
    collection_bind(collection="manuals", folder=docs)
    collections_sync()
    real_scandir = os.scandir

    def scandir(path: object) -> object:
        if Path(str(path)) == docs / "share":
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr("sources.services.sync.os.scandir", scandir)
    [result] = collections_sync()
    assert result.status == "failed"
    assert result.reason.startswith(
        f"bound folder {docs} (its folder {docs / 'share'}) cannot be read "
        "(Permission denied); its 3 source(s) are kept"
    )
    assert Source.objects.filter(path="share/valve.txt").exists()


def test_a_second_sync_while_one_is_running_does_nothing(docs: Path) -> None:
    collection_bind(collection="manuals", folder=docs)
    running = ingest_jobs.ingest_job_create(target=docs, collection="manuals", exclusive=True)
    [result] = collections_sync()
    assert result.status == "busy" and result.job_id == running.pk
    assert f"ingest job {running.pk}" in result.reason
    assert IngestJob.objects.count() == 1 and not Source.objects.exists()
    with pytest.raises(ingest_jobs.IngestJobBusy):
        ingest_jobs.ingest_job_create(target=docs, collection="manuals", exclusive=True)
    ingest_jobs.ingest_job_abort(job_id=running.pk, reason="test: the other process stopped")
    [result] = collections_sync()
    assert result.status == "synced" and result.counts["ingested"] == 2


def test_sync_names_only_bound_collections(docs: Path) -> None:
    collection_bind(collection="manuals", folder=docs)
    Collection.objects.create(name="loose")
    with pytest.raises(CollectionError, match="'loose' is not bound to a folder"):
        collections_sync(names=["loose"])
    with pytest.raises(CollectionError, match="no collection named 'ghost'"):
        collections_sync(names=["ghost"])
    assert [r.collection for r in collections_sync(names=["manuals"])] == ["manuals"]


def test_cli_bind_list_status_sync_unbind(docs: Path) -> None:
    assert f"Collection manuals is bound to {docs}" in foundry("collections", "bind", "manuals", str(docs))
    assert "not synced yet" in foundry("collections", "list")
    report = foundry("sync")
    assert "manuals" in report and "synced" in report and str(docs) in report
    listing = foundry("collections", "list")
    assert str(docs) in listing and "synced 20" in listing
    assert f"Collection manuals is bound to {docs}: synced" in foundry("status")
    with pytest.raises(CommandError, match="is already bound to collection 'manuals'"):
        foundry("collections", "bind", "other", str(docs))
    assert "no longer bound" in foundry("collections", "unbind", "manuals")
    assert "No collection is bound to a folder" in foundry("sync")


def test_cli_sync_exits_1_when_a_folder_failed(docs: Path, tmp_path: Path) -> None:
    collection_bind(collection="manuals", folder=docs)
    collections_sync()
    docs.rename(tmp_path / "gone")
    with pytest.raises(SystemExit) as exit_info:
        foundry("sync")
    assert exit_info.value.code == 1
    assert Source.objects.filter(collection__name="manuals").count() == 2


def test_the_admin_shows_the_binding_read_only(docs: Path, admin_client: object) -> None:
    coll = collection_bind(collection="manuals", folder=docs)
    collections_sync()
    listing = admin_client.get("/admin/sources/collection/").content.decode()
    assert str(docs) in listing
    page = admin_client.get(f"/admin/sources/collection/{coll.pk}/change/").content.decode()
    assert str(docs) in page and 'name="folder"' not in page  # shown, not editable: bind checks overlaps
