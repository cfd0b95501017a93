from __future__ import annotations

import re
from pathlib import Path
from collections.abc import Callable
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from sources.models import Chunk, Source
from tests.conftest import World

pytestmark = pytest.mark.django_db


def login(client: Client, world: World, name: str) -> Client:
    client.force_login(world.users[name])
    return client


def test_list_shows_only_readable_collections_and_sources(client: Client, world: World) -> None:
    page = login(client, world, "alice").get("/sources/")
    html = page.content.decode()
    assert page.status_code == 200
    assert "alpha.md" in html and "handbook.md" in html and "beta.txt" not in html
    assert ">beta<" not in html
    assert 'name="collection"' in html  # upload form offered for alpha
    assert "Delete" not in html  # not staff


def test_list_shows_status_reason_and_filters_by_collection(client: Client, world: World) -> None:
    Source.objects.filter(pk=world.sources["alpha"].pk).update(
        status="failed", reason="invalid JSON <script>x</script>"
    )
    html = login(client, world, "alice").get("/sources/?collection=alpha").content.decode()
    assert "Failed" in html and "invalid JSON &lt;script&gt;x&lt;/script&gt;" in html
    assert "handbook.md" not in html


def test_list_paginates(client: Client, world: World) -> None:
    coll = world.collections["alpha"]
    Source.objects.bulk_create([Source(collection=coll, root="/nowhere", path=f"f{i:03}.txt") for i in range(60)])
    login(client, world, "alice")
    first = client.get("/sources/?collection=alpha").content.decode()
    second = client.get("/sources/?collection=alpha&page=2").content.decode()
    assert "Page 1 of 2" in first and "f000.txt" in first and "f059.txt" not in first
    assert "f059.txt" in second and "f000.txt" not in second


def test_reader_of_public_collection_only_cannot_upload(client: Client, world: World, make_user: Any) -> None:
    client.force_login(make_user("dave"))
    html = client.get("/sources/").content.decode()
    assert "handbook.md" in html and "You cannot upload" in html
    response = client.post("/sources/upload", {"collection": "handbook", "file": SimpleUploadedFile("x.txt", b"hello")})
    assert response.status_code == 400 and not Source.objects.filter(path="x.txt").exists()


def test_upload_page_ingests_and_reports(client: Client, world: World, settings: Any) -> None:
    login(client, world, "alice")
    response = client.post(
        "/sources/upload",
        {"collection": "alpha", "file": SimpleUploadedFile("../../relay.md", b"# Relay\n\nThe relay trips at 30 A.\n")},
        follow=True,
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert "Uploaded relay.md: ingested (1 chunk)" in html
    source = Source.objects.get(path="relay.md")
    assert response.redirect_chain[-1][0] == f"/sources/#source-{source.pk}"
    assert (Path(settings.MEDIA_ROOT) / "alpha" / "relay.md").exists()


def test_upload_page_rejects_bad_type_too_large_and_other_collections(
    client: Client, world: World, foundry_config: Callable[..., Any]
) -> None:
    login(client, world, "alice")
    bad = client.post("/sources/upload", {"collection": "alpha", "file": SimpleUploadedFile("x.exe", b"MZ")})
    assert bad.status_code == 400 and "x.exe: unsupported file type" in bad.content.decode()
    empty = client.post("/sources/upload", {"collection": "alpha", "file": SimpleUploadedFile("notes.txt", b"")})
    assert empty.status_code == 400 and "notes.txt: the file is empty" in empty.content.decode()
    other = client.post("/sources/upload", {"collection": "beta", "file": SimpleUploadedFile("x.txt", b"hi")})
    assert other.status_code == 400 and "Select a valid choice" in other.content.decode()
    foundry_config(ingest={"max_file_mb": 0.001})
    big = client.post("/sources/upload", {"collection": "alpha", "file": SimpleUploadedFile("x.txt", b"a" * 5000)})
    assert big.status_code == 413 and "too large" in big.content.decode()
    assert not Source.objects.filter(path="x.txt").exists()


def test_upload_duplicate_is_refused_then_replaced(client: Client, world: World) -> None:
    login(client, world, "alice")

    def post(content: bytes, **extra: str) -> Any:
        return client.post(
            "/sources/upload",
            {"collection": "alpha", "file": SimpleUploadedFile("dup.txt", content), **extra},
            follow=True,
        )

    post(b"First version.\n")
    refused = post(b"Second version.\n")
    assert refused.status_code == 409 and "already exists" in refused.content.decode()
    replaced = post(b"Second version.\n", replace="on")
    assert "Uploaded new version of dup.txt: ingested" in replaced.content.decode()
    again = post(b"Second version.\n", replace="on")
    assert "dup.txt is unchanged: the same content is already indexed (1 chunk kept)" in again.content.decode()


def test_upload_and_delete_need_csrf(world: World) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(world.users["carol"])
    upload = client.post("/sources/upload", {"collection": "alpha", "file": SimpleUploadedFile("c.txt", b"hello")})
    assert upload.status_code == 403 and not Source.objects.filter(path="c.txt").exists()
    delete = client.post(f"/sources/{world.sources['alpha'].pk}/delete")
    assert delete.status_code == 403 and Source.objects.filter(pk=world.sources["alpha"].pk).exists()


def test_delete_is_staff_only_and_scoped(client: Client, world: World) -> None:
    alpha, beta = world.sources["alpha"], world.sources["beta"]
    assert login(client, world, "alice").post(f"/sources/{alpha.pk}/delete").status_code == 403
    login(client, world, "carol")
    assert client.get(f"/sources/{alpha.pk}/delete").status_code == 405
    assert client.post(f"/sources/{beta.pk}/delete").status_code == 404  # staff, but beta is not in scope
    response = client.post(f"/sources/{alpha.pk}/delete", follow=True)
    assert "Deleted alpha.md" in response.content.decode()
    assert not Source.objects.filter(pk=alpha.pk).exists() and Source.objects.filter(pk=beta.pk).exists()


def test_viewer_shows_chunks_with_target_highlighted(client: Client, world: World) -> None:
    source, chunks = world.sources["alpha"], world.chunks["alpha"]
    html = login(client, world, "alice").get(f"/sources/{source.pk}/?chunk={chunks[1].pk}").content.decode()
    assert html.index("Alpha power") < html.index("Alpha bus")
    assert f'class="chunk target" id="chunk-{chunks[1].pk}"' in html
    assert f'class="chunk" id="chunk-{chunks[0].pk}"' in html
    assert "§ Alpha" in html and "line 3" in html
    assert f"/sources/{source.pk}/download" in html


def test_viewer_numbers_the_cited_chunk_and_highlights_the_cited_lines(client: Client, world: World) -> None:
    source = world.sources["alpha"]
    text = "Wiring:\nUse shielded <twisted-pair> cable.\nTerminate with 120 Ω.\nKeep stubs short."
    chunk = Chunk.objects.create(source=source, ordinal=2, text=text, line_start=10, line_end=13, token_count=9)
    viewer = login(client, world, "alice")
    html = viewer.get(f"/sources/{source.pk}/?chunk={chunk.pk}&lines=11-12").content.decode()
    assert "the cited lines are highlighted" in html
    lines = re.findall(r'<span class="line( cited)?"><span class="n" aria-hidden="true">(\d+)</span>', html)
    assert lines == [("", "10"), (" cited", "11"), (" cited", "12"), ("", "13")]
    assert "<mark>Use shielded &lt;twisted-pair&gt; cable.</mark>" in html  # escaped, as all document text
    assert "<mark>Keep stubs short.</mark>" not in html and "Keep stubs short." in html
    for cited in ("99", "x", "11-"):  # lines the chunk does not hold, or no lines: the chunk as before, unnumbered
        other = viewer.get(f"/sources/{source.pk}/?chunk={chunk.pk}&lines={cited}").content.decode()
        assert 'class="numbered"' not in other and "highlighted" not in other and "Keep stubs short." in other
    # a chunk whose text does not map line by line (paragraphs further apart than its lines) is not numbered
    spread = world.chunks["alpha"][0]  # "# Alpha\n\nAlpha power is 24 V." on line 1
    html = viewer.get(f"/sources/{source.pk}/?chunk={spread.pk}&lines=1-1").content.decode()
    assert 'class="numbered"' not in html and f'class="chunk target" id="chunk-{spread.pk}"' in html


def test_viewer_marks_the_cited_row_of_a_table_and_not_its_header(client: Client, world: World) -> None:
    source = world.sources["alpha"]
    source.kind = "xlsx"
    source.save()
    text = "Model | Flow\nP1 | 4\n\nP2 | 6\n\nP3 | 9"
    line_map = [None, [2, 2], None, [3, 3], None, [5, 5]]  # row 4 is empty
    chunk = Chunk.objects.create(
        source=source, ordinal=3, text=text, heading="Pumps", line_start=2, line_end=5, token_count=9, line_map=line_map
    )
    html = login(client, world, "alice").get(f"/sources/{source.pk}/?chunk={chunk.pk}&lines=3-3").content.decode()
    assert "the cited rows are highlighted" in html
    lines = re.findall(r'<span class="line( cited)?"><span class="n" aria-hidden="true">(\d*)</span>([^<]*)', html)
    assert lines == [
        ("", "", "Model | Flow"),
        ("", "2", "P1 | 4"),
        ("", "", ""),
        (" cited", "3", ""),
        ("", "", ""),
        ("", "5", "P3 | 9"),
    ]
    assert re.findall(r"<mark>(.*?)</mark>", html) == ["P2 | 6"]
    # A citation recorded as the chunk's whole span marks its rows, never the header over them.
    whole = client.get(f"/sources/{source.pk}/?chunk={chunk.pk}&lines=2-5").content.decode()
    assert re.findall(r"<mark>(.*?)</mark>", whole) == ["P1 | 4", "P2 | 6", "P3 | 9"]


def test_viewer_escapes_document_text(client: Client, world: World) -> None:
    chunk = world.chunks["alpha"][0]
    chunk.text = "<script>alert(1)</script>"
    chunk.save()
    html = login(client, world, "alice").get(f"/sources/{chunk.source_id}/").content.decode()
    assert "<script>alert(1)" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_viewer_and_download_answer_404_outside_scope(client: Client, world: World) -> None:
    beta = world.sources["beta"]
    login(client, world, "alice")
    assert client.get(f"/sources/{beta.pk}/").status_code == 404
    assert client.get(f"/sources/{beta.pk}/download").status_code == 404
    assert client.get("/sources/999999/").status_code == 404
    alpha = world.sources["alpha"]
    # A chunk id of another source (even a readable one) is not in this source.
    other = client.get(f"/sources/{alpha.pk}/?chunk={world.chunks['beta'][0].pk}")
    assert other.status_code == 404 and world.chunks["beta"][0].text not in other.content.decode()
    # ... nor one it held before it was ingested again: the page says so over the source as it is now.
    gone = client.get(f"/sources/{alpha.pk}/?chunk=abc<b>")
    page = gone.content.decode()
    assert gone.status_code == 404 and "This source holds no passage “abc&lt;b&gt;”" in page
    assert "Alpha power is 24 V." in page and "Showing chunk" not in page
    # Superusers see everything.
    login(client, world, "root")
    assert client.get(f"/sources/{beta.pk}/").status_code == 200


def test_download_is_an_attachment_of_the_original(client: Client, world: World) -> None:
    source = world.sources["alpha"]
    response = login(client, world, "alice").get(f"/sources/{source.pk}/download")
    assert response.status_code == 200
    assert response["Content-Disposition"] == 'attachment; filename="alpha.md"'
    assert b"".join(response.streaming_content).startswith(b"# Alpha")


def test_download_refuses_paths_outside_the_root(client: Client, world: World, tmp_path: Path) -> None:
    source = world.sources["alpha"]
    secret = tmp_path / "secret.txt"
    secret.write_text("do not serve")
    login(client, world, "alice")
    Source.objects.filter(pk=source.pk).update(path="../../secret.txt")
    assert client.get(f"/sources/{source.pk}/download").status_code == 404
    # A symbolic link inside the root that points outside it is refused too.
    link = Path(source.root) / "link.txt"
    link.symlink_to(secret)
    Source.objects.filter(pk=source.pk).update(path="link.txt")
    assert client.get(f"/sources/{source.pk}/download").status_code == 404
    Source.objects.filter(pk=source.pk).update(path="missing.md")
    assert client.get(f"/sources/{source.pk}/download").status_code == 404
