"""The docs name only what exists: every ``foundry`` command and every ``foundry.yaml`` key the README and
``docs/`` write in code exists in the CLI's argparse and the config schema, and the configuration page is the
one ``scripts/config_reference.py`` writes from that schema."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import re
from pathlib import Path

import pytest
from django.apps import apps

from core.config import FoundryConfig
from foundry_site.management.commands.foundry import Command

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
# Inline code spans and fenced blocks: where the docs write commands and keys as they are typed.
CODE = re.compile(r"```.*?```|`[^`\n]+`", re.DOTALL)
COMMAND = re.compile(r"(?:^|[\s/(])foundry ([a-z][\w-]*)(?: +([a-z][\w-]*))?", re.MULTILINE)
SECTIONS = "|".join(FoundryConfig.model_fields)
KEY = re.compile(rf"^({SECTIONS})\.([a-z_]+)(?::\s.*)?$")
# A file the docs name, such as an audit artifact's `retrieval.json`, is no key.
FILE_SUFFIXES = {"json", "jsonl", "md", "py", "txt", "csv", "yaml"}


def code_spans() -> list[tuple[str, str]]:
    """``(page name, code)`` for every code span and block of the README and docs/."""
    return [
        (page.relative_to(REPO).as_posix(), m.group(0).strip("`"))
        for page in PAGES
        for m in CODE.finditer(page.read_text(encoding="utf-8"))
    ]


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def named_commands() -> list[tuple[str, str, str]]:
    """``(page, command, sub-command or "")`` for each ``foundry …`` written in code."""
    found = []
    for page, code in code_spans():
        for match in COMMAND.finditer(code):
            found.append((page, match.group(1), match.group(2) or ""))
    return found


def test_the_docs_name_commands() -> None:
    """The scan reads the docs: the quick starts' commands are among what it finds."""
    names = {(command, sub) for _, command, sub in named_commands()}
    assert {("query", ""), ("specs", "import"), ("serve", "")} <= {(c, s if c == "specs" else "") for c, s in names}


def test_every_command_the_docs_name_exists() -> None:
    commands = subcommands(Command().create_parser("manage.py", "foundry"))
    unknown = []
    for page, command, sub in named_commands():
        if command not in commands:
            unknown.append(f"{page}: foundry {command}")
            continue
        actions = subcommands(commands[command])
        # A word after a command with actions is one of them, unless it is an argument the command takes.
        if actions and sub and sub not in actions and not positional(commands[command]):
            unknown.append(f"{page}: foundry {command} {sub}")
    assert unknown == [], unknown


def positional(parser: argparse.ArgumentParser) -> bool:
    """Whether ``parser`` itself takes a positional argument beside its actions (``foundry jobs [ID]``)."""
    return any(
        not action.option_strings and not isinstance(action, argparse._SubParsersAction) for action in parser._actions
    )


def named_keys() -> list[tuple[str, str, str]]:
    return [
        (page, m.group(1), m.group(2))
        for page, code in code_spans()
        if (m := KEY.match(code.strip())) and m.group(2) not in FILE_SUFFIXES
    ]


def test_the_docs_name_keys() -> None:
    assert ("retrieval", "min_score") in {(section, key) for _, section, key in named_keys()}


def test_every_config_key_the_docs_name_exists() -> None:
    unknown = [
        f"{page}: {section}.{key}"
        for page, section, key in named_keys()
        if key not in FoundryConfig.model_fields[section].annotation.model_fields  # type: ignore[union-attr]
        and not permission_or_module(f"{section}.{key}")
    ]
    assert unknown == [], unknown


def permission_or_module(dotted: str) -> bool:
    """A Django permission (``generation.view_querylog``) or a module of the same name (``generation.asking``),
    which the docs write in code too and which share the config sections' first names."""
    label, _, name = dotted.partition(".")
    if label in {config.label for config in apps.get_app_configs()}:
        for model in apps.get_app_config(label).get_models():
            meta = model._meta
            codenames = {f"{verb}_{meta.model_name}" for verb in meta.default_permissions}
            if name in codenames | {code for code, _ in meta.permissions}:
                return True
    try:
        return importlib.util.find_spec(dotted) is not None
    except ModuleNotFoundError:
        return False


def test_configuration_page_is_what_the_script_writes() -> None:
    spec = importlib.util.spec_from_file_location("config_reference", REPO / "scripts" / "config_reference.py")
    assert spec and spec.loader
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    committed = (REPO / "docs" / "configuration.md").read_text(encoding="utf-8")
    assert committed == script.reference(), "docs/configuration.md is stale: run python scripts/config_reference.py"


@pytest.mark.parametrize("section", list(FoundryConfig.model_fields))
def test_configuration_page_lists_every_key(section: str) -> None:
    page = (REPO / "docs" / "configuration.md").read_text(encoding="utf-8")
    keys = FoundryConfig.model_fields[section].annotation.model_fields  # type: ignore[union-attr]
    assert [k for k in keys if f"| `{section}.{k}` |" not in page] == []
