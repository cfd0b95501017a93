from __future__ import annotations

import os
from pathlib import Path
from collections.abc import Callable
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from sources.models import Chunk, Source
from sources.services.ingest_jobs import knowledge_base_ingest
from sources.services.uploads import (
    UploadExists,
    UploadRejected,
    UploadTooLarge,
    source_remove,
    source_upload,
    upload_check,
    upload_filename,
)
from tests.conftest import World, make_pdf

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "raw, safe",
    [
        ("manual.md", "manual.md"),
        ("../../etc/passwd.txt", "passwd.txt"),
        ("..\\..\\Windows\\notes.TXT", "notes.txt"),
        ("/abs/path/spec.json", "spec.json"),
        (".hidden.md", "hidden.md"),
        ("bad\x00name\r\n.txt", "badname.txt"),
        ("rtl\u202etxt.md", "rtltxt.md"),
        ('a<b>|c"d?.pdf', "a_b__c_d_.pdf"),
        ("Überblick  Datenblatt.pdf", "Überblick Datenblatt.pdf"),
    ],
)
def test_filename_is_sanitised(raw: str, safe: str) -> None:
    assert upload_filename(raw) == safe


@pytest.mark.parametrize("raw", ["..", "../", ".txt", "noext", "evil.exe", "archive.tar.gz", "x.md/", "", "...md"])
def test_filename_without_allowed_type_is_rejected(raw: str) -> None:
    with pytest.raises(UploadRejected):
        upload_filename(raw)


def test_long_names_are_cut_but_keep_their_type() -> None:
    safe = upload_filename("a" * 500 + ".md")
    assert len(safe) == 150 and safe.endswith(".md")


def test_content_must_match_the_type(foundry_config: Callable[..., Any]) -> None:
    with pytest.raises(UploadRejected, match="not a PDF"):
        upload_check(name="x.pdf", size=10, head=b"hello")
    with pytest.raises(UploadRejected, match="UTF-8"):
        upload_check(name="x.txt", size=10, head=b"\xff\xfe\x00h\x00i")
    with pytest.raises(UploadRejected, match="empty"):
        upload_check(name="x.txt", size=0, head=b"")
    with pytest.raises(UploadRejected, match="named .docx but is not a Word document"):
        upload_check(name="x.docx", size=10, head=b"<html>")
    with pytest.raises(UploadRejected, match="named .png but is not a PNG, JPEG or TIFF image"):
        upload_check(name="x.png", size=10, head=b"GIF89a")
    with pytest.raises(UploadRejected, match=".csv files must be UTF-8 text"):
        upload_check(name="x.csv", size=10, head=b"a;b\n\xfc;1")
    assert upload_check(name="x.xlsx", size=10, head=b"PK\x03\x04rest") == "x.xlsx"
    assert upload_check(name="locked.docx", size=10, head=b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1") == "locked.docx"
    assert upload_check(name="scan.JPG", size=10, head=b"\xff\xd8\xff\xe0") == "scan.jpg"
    assert upload_check(name="page.htm", size=10, head="<p>M\xfcnchen</p>".encode("latin-1")) == "page.htm"
    # A multi-byte character cut off by the sniff window is fine.
    assert upload_check(name="x.md", size=3, head="aé".encode()[:2]) == "x.md"
    foundry_config(ingest={"max_file_mb": 0.001})
    with pytest.raises(UploadTooLarge, match="limit is 0.001 MB"):
        upload_check(name="x.txt", size=2000, head=b"a")


def upload(name: str, content: bytes) -> SimpleUploadedFile:
    return SimpleUploadedFile(name, content, content_type="application/octet-stream")


def test_upload_stores_under_collection_and_ingests(world: World, settings: Any) -> None:
    result = source_upload(
        collection=world.collections["alpha"], upload=upload("../../notes.md", b"# Notes\n\nThe relay trips at 30 A.\n")
    )
    stored = Path(settings.MEDIA_ROOT) / "alpha" / "notes.md"
    assert stored.read_bytes().startswith(b"# Notes")
    assert result.result.status == "ingested" and result.result.chunks >= 1 and not result.replaced
    assert result.source.collection.name == "alpha" and result.source.root == str(stored.parent)
    assert Chunk.objects.filter(source=result.source, text__contains="30 A").exists()
    assert [p.name for p in stored.parent.iterdir()] == ["notes.md"]  # no temporary file left


def test_duplicate_name_is_refused_unless_replaced(world: World, settings: Any) -> None:
    coll = world.collections["alpha"]
    first = source_upload(collection=coll, upload=upload("n.txt", b"Version one of the notes.\n"))
    with pytest.raises(UploadExists, match="already exists"):
        source_upload(collection=coll, upload=upload("n.txt", b"Version two.\n"))
    assert (Path(settings.MEDIA_ROOT) / "alpha" / "n.txt").read_bytes() == b"Version one of the notes.\n"

    again = source_upload(collection=coll, upload=upload("n.txt", b"Version one of the notes.\n"), replace=True)
    assert again.result.status == "unchanged"
    second = source_upload(collection=coll, upload=upload("n.txt", b"Version two of the notes.\n"), replace=True)
    assert second.replaced and second.result.status == "ingested" and second.source.pk == first.source.pk
    assert Chunk.objects.filter(source=second.source, text__contains="two").exists()
    assert not Chunk.objects.filter(source=second.source, text__contains="one").exists()


def test_name_of_a_file_ingested_from_a_folder_is_refused_even_with_replace(
    world: World, settings: Any, tmp_path: Path
) -> None:
    coll = world.collections["alpha"]
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "n.txt").write_text("The folder's notes.\n")
    knowledge_base_ingest(target=tmp_path / "docs", collection="alpha")
    for replace in (False, True):
        with pytest.raises(
            UploadExists,
            match=r"n.txt is already in collection alpha, ingested from a folder "
            r"\(source \d+, not an upload\); give the upload another name",
        ):
            source_upload(collection=coll, upload=upload("n.txt", b"Other notes.\n"), replace=replace)
    assert list(Source.objects.filter(path="n.txt").values_list("root", flat=True)) == [str(tmp_path / "docs")]
    assert not (Path(settings.MEDIA_ROOT) / "alpha" / "n.txt").exists()
    other = source_upload(collection=world.collections["beta"], upload=upload("n.txt", b"Beta's own notes.\n"))
    assert other.result.status == "ingested"  # another collection's name is its own


def test_rejected_upload_stores_nothing(world: World, settings: Any, foundry_config: Callable[..., Any]) -> None:
    foundry_config(ingest={"max_file_mb": 0.001})
    for name, content in (("big.txt", b"a" * 5000), ("evil.exe", b"MZ"), ("fake.pdf", b"not a pdf")):
        with pytest.raises(UploadRejected):
            source_upload(collection=world.collections["alpha"], upload=upload(name, content))
    assert not Path(settings.MEDIA_ROOT).exists() or not any(Path(settings.MEDIA_ROOT).rglob("*"))
    assert not Source.objects.filter(collection=world.collections["alpha"]).exclude(path="alpha.md").exists()


def test_unreadable_content_is_stored_and_reported_failed(world: World) -> None:
    result = source_upload(collection=world.collections["alpha"], upload=upload("broken.json", b"{not json"))
    assert result.result.status == "failed" and result.result.reason
    assert result.source.status == Source.Status.FAILED


def test_pdf_upload(world: World, tmp_path: Path) -> None:
    pdf = make_pdf(tmp_path / "sheet.pdf", [("1 Intro", "The AX-200 is a gateway."), ("2 Power", "VCC is 5 V.")])
    result = source_upload(collection=world.collections["beta"], upload=upload("sheet.pdf", pdf.read_bytes()))
    assert result.result.status == "ingested"
    assert Chunk.objects.get(source=result.source, text__contains="VCC").page_start == 2


def test_office_uploads_are_ingested(world: World, tmp_path: Path) -> None:
    from tests.sources.office_files import make_docx, make_xlsx

    for name, path in (("manual.docx", make_docx(tmp_path / "m.docx")), ("pumps.xlsx", make_xlsx(tmp_path / "p.xlsx"))):
        result = source_upload(collection=world.collections["beta"], upload=upload(name, path.read_bytes()))
        assert result.result.status == "ingested" and result.source.kind == name.rsplit(".", 1)[1]
    assert (
        Chunk.objects.get(source__path="manual.docx", text__contains="2 A fuse").heading
        == "Installation > Power supply"
    )


def test_remove_deletes_uploaded_file_but_not_knowledge_base_files(world: World, settings: Any) -> None:
    result = source_upload(collection=world.collections["alpha"], upload=upload("gone.txt", b"Temporary text.\n"))
    stored = Path(settings.MEDIA_ROOT) / "alpha" / "gone.txt"
    source_remove(source_id=result.source.pk)
    assert not stored.exists() and not Source.objects.filter(pk=result.source.pk).exists()

    kb_source = world.sources["beta"]
    source_remove(source_id=kb_source.pk)
    assert os.path.exists(kb_source.absolute_path) and not Source.objects.filter(pk=kb_source.pk).exists()
    source_remove(source_id=kb_source.pk)  # removing twice is a no-op
