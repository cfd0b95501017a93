from __future__ import annotations

from io import StringIO
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError

from specs.models import SpecStatus, SpecVersion
from specs.selectors import spec_for_generation

pytestmark = pytest.mark.django_db


def foundry(*args: str) -> str:
    out = StringIO()
    call_command("foundry", "specs", *args, stdout=out)
    return out.getvalue()


@pytest.fixture
def spec_file(tmp_path: Path) -> Path:
    path = tmp_path / "wiring-guide.md"
    path.write_text("# Wiring guide\n\nPrefer datasheet-v2 over datasheet-v1.\n")
    return path


def test_import_submit_approve_list_show(spec_file: Path, author: User, reviewer: User) -> None:
    assert "wiring-guide: created (v1, draft) — Wiring guide" in foundry("import", str(spec_file), "--as", "alice")
    assert "wiring-guide v1: in_review" in foundry("submit", "wiring-guide", "--as", "alice")
    out = foundry("approve", "wiring-guide", "--as", "rita", "--note", "ok")
    assert "wiring-guide v1: approved" in out and "Generation now uses 'wiring-guide' v1" in out
    listing = foundry("list")
    assert "wiring-guide" in listing and "v1 approved" in listing
    shown = foundry("show", "wiring-guide")
    assert "in_review -> approved    rita" in shown and "Prefer datasheet-v2" in shown
    assert spec_for_generation().name == "wiring-guide"


def test_reimport_reports_unchanged_and_new_version(spec_file: Path, author: User, reviewer: User) -> None:
    foundry("import", str(spec_file), "--as", "alice")
    assert "unchanged (v1, draft)" in foundry("import", str(spec_file), "--as", "alice")
    foundry("submit", "wiring-guide", "--as", "alice")
    foundry("approve", "wiring-guide", "--as", "rita")
    spec_file.write_text("# Wiring guide\n\nNew rules.\n")
    assert "new version (v2, draft)" in foundry("import", str(spec_file), "--as", "alice")
    listing = foundry("list", "--approved")
    assert "v2 draft" in listing and " v1 " in listing


def test_reject_with_note(spec_file: Path, author: User, reviewer: User) -> None:
    foundry("import", str(spec_file), "--as", "alice")
    foundry("submit", "wiring-guide", "--as", "alice")
    with pytest.raises(CommandError, match="needs a note"):
        foundry("reject", "wiring-guide", "--as", "rita")
    assert "v1: rejected" in foundry("reject", "wiring-guide", "--as", "rita", "--note", "too vague")
    assert SpecVersion.objects.get().decision_note == "too vague"


def test_errors_are_command_errors(spec_file: Path, author: User, reviewer: User, outsider: User) -> None:
    with pytest.raises(CommandError, match="needs --as USER"):
        foundry("import", str(spec_file))
    with pytest.raises(CommandError, match="No user named 'ghost'"):
        foundry("import", str(spec_file), "--as", "ghost")
    foundry("import", str(spec_file), "--as", "alice")
    with pytest.raises(CommandError, match="version 1 is a draft; submit it for review first"):
        foundry("approve", "wiring-guide", "--as", "rita")
    foundry("submit", "wiring-guide", "--as", "alice")
    with pytest.raises(CommandError, match="otto may not approve 'wiring-guide': that needs the permission"):
        foundry("approve", "wiring-guide", "--as", "otto")
    with pytest.raises(CommandError, match="No feature spec named 'nope'"):
        foundry("show", "nope")
    assert SpecVersion.objects.get().status == SpecStatus.IN_REVIEW


def test_archive(spec_file: Path, author: User, reviewer: User) -> None:
    foundry("import", str(spec_file), "--as", "alice")
    foundry("submit", "wiring-guide", "--as", "alice")
    foundry("approve", "wiring-guide", "--as", "rita")
    assert "v1: archived" in foundry("archive", "wiring-guide", "--as", "rita", "--note", "retired")
    assert "No feature specs" in foundry("list", "--approved")
