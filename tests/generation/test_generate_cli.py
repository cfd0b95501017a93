from __future__ import annotations

import io
import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from django.contrib.auth.models import Permission, User
from django.core.management import call_command
from django.core.management.base import CommandError

from core.config import FoundryConfig
from generation.models import GenerationRun
from sources.services.ingest_jobs import knowledge_base_ingest
from specs import services
from tests.conftest import ScriptedLLM
from tests.generation.conftest import DATASHEET, MANUAL

pytestmark = pytest.mark.django_db

REPLY = "# Sensor bus\n\nUp to 8 sensors can be connected to the RS-485 bus [S1].\n"


@pytest.fixture
def people(db: None) -> tuple[User, User]:
    author = User.objects.create_user("alice")
    reviewer = User.objects.create_user("rita")
    reviewer.user_permissions.add(Permission.objects.get(codename="approve_featurespec"))
    return author, User.objects.get(pk=reviewer.pk)


def approve(name: str, people: tuple[User, User]) -> None:
    author, reviewer = people
    services.spec_create(name=name, title=name, body=f"# {name}\n\nWrite a short guide.\n", by=author)
    services.spec_submit(name=name, by=author)
    services.spec_approve(name=name, by=reviewer)


@pytest.fixture
def ready(kb: Path, foundry_config, people: tuple[User, User], scripted_llm: ScriptedLLM) -> ScriptedLLM:
    foundry_config(retrieval={"min_chunks": 1})
    (kb / "manual.md").write_text(MANUAL)
    (kb / "datasheet.md").write_text(DATASHEET)
    knowledge_base_ingest(target=kb)
    approve("wiring-guide", people)
    scripted_llm.reply = lambda m: REPLY
    return scripted_llm


def run(*args: str) -> str:
    out = io.StringIO()
    call_command("foundry", *args, stdout=out)
    return out.getvalue()


def test_single_approved_spec_is_selected(ready: ScriptedLLM, tmp_path: Path) -> None:
    out = tmp_path / "guide.md"
    text = run("generate", "--topic", "sensors on the RS-485 bus", "--output", str(out))
    assert "Wrote" in text and "spec wiring-guide v1" in text
    assert "[^1]" in out.read_text()
    umask = os.umask(0)
    os.umask(umask)
    assert out.stat().st_mode & 0o777 == 0o666 & ~umask  # not mkstemp's 0600
    assert GenerationRun.objects.get().status == "succeeded"


def test_a_reply_cut_at_the_token_limit_loses_its_unfinished_sentence(
    ready: ScriptedLLM, foundry_config, tmp_path: Path
) -> None:
    foundry_config(retrieval={"min_chunks": 1}, generation={"max_document_tokens": 64})
    ready.reply = lambda m: REPLY.rstrip() + " The default serial settings of"
    ready.completion_tokens = 64
    out = tmp_path / "guide.md"
    run("generate", "--topic", "sensors on the RS-485 bus", "--output", str(out))
    text = out.read_text()
    assert "Up to 8 sensors can be connected" in text and "serial settings" not in text
    assert (GenerationRun.objects.get().sentences_kept, GenerationRun.objects.get().sentences_total) == (1, 1)

    ready.completion_tokens = 63  # ended by the model, not the limit: the grounding check alone decides
    run("generate", "--topic", "sensors on the RS-485 bus", "--output", str(out), "--yes")
    assert GenerationRun.objects.latest("pk").sentences_total == 2


def test_a_document_mostly_removed_by_grounding_says_so(
    ready: ScriptedLLM, tmp_path: Path, foundry_config: Callable[..., FoundryConfig]
) -> None:
    ready.reply = lambda m: REPLY.rstrip() + " The bus also powers the coffee machine on the second floor."
    out = tmp_path / "guide.md"
    text = run("generate", "--topic", "sensors on the RS-485 bus", "--output", str(out))
    assert "coverage 50%" in text and "NEEDS REVIEW — low confidence, limited source coverage" in text
    document = out.read_text()
    assert document.startswith("# Sensor bus\n\n> **Low confidence — limited source coverage:** 1 of the 2 sentences")
    assert "coffee" not in document
    low = json.loads(run("generate", "--topic", "sensors on the RS-485 bus", "--output", str(out), "--yes", "--json"))
    assert low["coverage"] == 0.5 and low["low_confidence"] is True and low["status"] == "needs_review"
    foundry_config(generation={"min_coverage": 0.4})
    assert GenerationRun.objects.get(pk=low["run_id"]).low_confidence  # as the run decided, whatever the settings now

    ready.reply = lambda m: REPLY
    good = json.loads(run("generate", "--topic", "sensors on the RS-485 bus", "--output", str(out), "--yes", "--json"))
    assert good["coverage"] == 1.0 and good["low_confidence"] is False and "Low confidence" not in out.read_text()
    assert good["status"] == "succeeded"


def test_several_specs_need_feature_and_error_lists_them(
    ready: ScriptedLLM, people: tuple[User, User], tmp_path: Path
) -> None:
    approve("install-guide", people)
    with pytest.raises(CommandError, match="install-guide, wiring-guide. Choose one with --feature"):
        run("generate", "--topic", "sensor bus", "--output", str(tmp_path / "x.md"))
    run(
        "generate",
        "--topic",
        "sensors on the RS-485 bus",
        "--output",
        str(tmp_path / "x.md"),
        "--feature",
        "install-guide",
    )
    assert GenerationRun.objects.get().spec_name == "install-guide"


def test_no_approved_spec_says_how(kb: Path, db: None, tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="No approved feature spec. Import one"):
        run("generate", "--topic", "x", "--output", str(tmp_path / "x.md"))


def test_dry_run_makes_no_generation_call(ready: ScriptedLLM, tmp_path: Path) -> None:
    text = run("generate", "--topic", "sensors on the RS-485 bus", "--dry-run")  # writes nothing: no --output
    assert "--- system prompt ---" in text and "<context>" in text and "[S1]" in text
    assert "fused" in text and "bm25 #" in text and "--- user ---\nTopic: sensors on the RS-485 bus\n\nWrite" in text
    assert ready.calls == [] and not GenerationRun.objects.exists()


def test_a_document_needs_an_output_path(ready: ScriptedLLM) -> None:
    with pytest.raises(CommandError, match="--output is required: the path of the Markdown file to write"):
        run("generate", "--topic", "sensors on the RS-485 bus")
    assert ready.calls == [] and not GenerationRun.objects.exists()


def test_existing_file_without_terminal_is_refused(
    ready: ScriptedLLM, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "guide.md"
    out.write_text("keep me")
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    with pytest.raises(CommandError, match="File exists: guide.md. Not overwriting without --yes"):
        run("generate", "--topic", "sensor bus", "--output", str(out))
    assert out.read_text() == "keep me" and ready.calls == []


@pytest.mark.parametrize(
    "where,reason", [("folder", "is a folder; give a file path"), ("missing/guide.md", "does not exist")]
)
def test_an_output_that_cannot_take_a_file_is_refused_before_any_work(
    ready: ScriptedLLM, tmp_path: Path, where: str, reason: str
) -> None:
    (tmp_path / "folder").mkdir()
    with pytest.raises(CommandError, match=f"--output: .*{reason}"):
        run("generate", "--topic", "sensor bus", "--output", str(tmp_path / where), "--yes")
    assert ready.calls == [] and not GenerationRun.objects.exists()


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("typed,overwritten", [("y\n", True), ("n\n", False), ("\n", False)])
def test_prompt_at_terminal(
    ready: ScriptedLLM,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture,
    typed: str,
    overwritten: bool,
) -> None:
    out = tmp_path / "guide.md"
    out.write_text("keep me")
    monkeypatch.setattr("sys.stdin", _Tty(typed))
    if overwritten:
        run("generate", "--topic", "sensors on the RS-485 bus", "--output", str(out))
    else:
        with pytest.raises(CommandError, match="Not overwritten"):
            run("generate", "--topic", "sensors on the RS-485 bus", "--output", str(out))
    assert "File exists: guide.md\nOverwrite? [y/N]: " in capsys.readouterr().err
    assert (out.read_text() != "keep me") == overwritten


def test_yes_overwrites_and_json(ready: ScriptedLLM, tmp_path: Path) -> None:
    out = tmp_path / "guide.md"
    out.write_text("old")
    data = json.loads(run("generate", "--topic", "sensors on the RS-485 bus", "--output", str(out), "--yes", "--json"))
    assert data["status"] == "succeeded" and data["coverage"] == 1.0 and "Sources" in out.read_text()


def test_gate_refusal_fails_run_and_writes_nothing(
    ready: ScriptedLLM, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "rome.md"
    with pytest.raises(CommandError, match="No supporting documentation"):
        run("generate", "--topic", "history of the roman empire", "--output", str(out))
    assert not out.exists() and ready.calls == []
    progress = capsys.readouterr().err
    assert progress.endswith(": failed\n") and ": done" not in progress  # the progress line never says done
