"""A bound folder kept in sync through `foundry sync`, with the real embedding model: edits, additions and
deletions reach the index, and nothing else changes."""

from __future__ import annotations

from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from retrieval.models import ChunkSearch
from sources.models import Chunk, Source
from tests.sources.test_ingest import index_agrees

pytestmark = [pytest.mark.integration, pytest.mark.django_db]


def foundry(*args: str) -> str:
    out = StringIO()
    call_command("foundry", *args, stdout=out)
    return out.getvalue()


def chunk_texts(path: str) -> str:
    return "\n".join(Chunk.objects.filter(source__path=path).order_by("ordinal").values_list("text", flat=True))


def test_bind_sync_edit_add_delete_sync(tmp_path: Path) -> None:
    folder = tmp_path / "team-docs"
    (folder / "pumps").mkdir(parents=True)
    (folder / "pumps" / "p100.md").write_text("# Pump P-100\n\n## Seal\n\nReplace the shaft seal every 4000 hours.\n")
    (folder / "gateway.txt").write_text("The gateway needs 24 V DC.\n")
    (folder / "old.csv").write_text("tag,setpoint\nTIC-101,85 C\n")
    foundry("collections", "bind", "plant", str(folder))

    first = foundry("sync")
    assert "plant" in first and "synced" in first
    assert set(Source.objects.filter(collection__name="plant").values_list("path", flat=True)) == {
        "pumps/p100.md",
        "gateway.txt",
        "old.csv",
    }
    seal = Chunk.objects.get(source__path="pumps/p100.md")
    untouched = Chunk.objects.get(source__path="gateway.txt")
    index_agrees()

    (folder / "pumps" / "p100.md").write_text("# Pump P-100\n\n## Seal\n\nReplace the shaft seal every 6000 hours.\n")
    (folder / "valves.md").write_text("# Valve V-2\n\nThe relief valve V-2 opens at 3 bar.\n")
    (folder / "old.csv").unlink()
    second = foundry("sync", "--json")
    assert '"ingested": 2' in second and '"removed": 1' in second and '"unchanged": 1' in second

    assert set(Source.objects.values_list("path", flat=True)) == {"pumps/p100.md", "gateway.txt", "valves.md"}
    assert "6000 hours" in chunk_texts("pumps/p100.md") and "4000" not in chunk_texts("pumps/p100.md")
    assert not Chunk.objects.filter(pk=seal.pk).exists()  # the old chunk and its vectors went with it
    assert Chunk.objects.get(source__path="gateway.txt").pk == untouched.pk  # unchanged: not re-ingested
    assert "3 bar" in chunk_texts("valves.md")
    assert not Chunk.objects.filter(text__contains="TIC-101").exists()
    index_agrees()
    [hit] = ChunkSearch.search.keyword("relief valve opens", limit=1)
    assert Chunk.objects.get(pk=hit.chunk_id).source.path == "valves.md"

    third = foundry("sync", "--json")  # nothing changed: nothing done
    assert '"ingested": 0' in third and '"unchanged": 3' in third and '"removed": 0' in third
