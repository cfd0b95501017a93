"""Shared fixtures: scripted LLM, config overrides, small documents built on the fly."""
from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings as django_settings

from foundry_site import llm
from foundry_site.config import FoundryConfig


@dataclass
class ScriptedLLM(llm.CustomLLM):
    """A litellm provider (``scripted/…``) whose replies come from a test-supplied function."""

    reply: Callable[[list[dict[str, str]]], str] = lambda messages: "Scripted reply."
    calls: list[list[dict[str, str]]] = field(default_factory=list)

    def __post_init__(self) -> None:
        super().__init__()

    def completion(self, model: str, messages: list, api_base: str, custom_prompt_dict: dict,
                   model_response: Any, *args: Any, **kwargs: Any) -> Any:
        self.calls.append(messages)
        model_response.choices[0].message.content = self.reply(messages)
        model_response.model = f"scripted/{model}"
        return model_response


def config_with(base: FoundryConfig, **sections: dict[str, Any]) -> FoundryConfig:
    """A copy of ``base`` with some keys of some sections replaced."""
    updates = {name: getattr(base, name).model_copy(update=values) for name, values in sections.items()}
    return base.model_copy(update=updates)


@pytest.fixture
def scripted_llm() -> Iterator[ScriptedLLM]:
    handler = ScriptedLLM()
    llm.register_provider("scripted", handler)
    yield handler


@pytest.fixture
def foundry_config(settings: Any) -> Callable[..., FoundryConfig]:
    """Call with section overrides, e.g. ``foundry_config(ingest={"max_file_mb": 1})``."""

    def apply(**sections: dict[str, Any]) -> FoundryConfig:
        settings.FOUNDRY = config_with(settings.FOUNDRY, **sections)
        return settings.FOUNDRY

    return apply


@pytest.fixture(autouse=True)
def offline_unit_config(request: pytest.FixtureRequest, settings: Any, tmp_path: Path) -> None:
    """Unit tests never reach a real LLM: every LLM role is off unless a test scripts one.

    Integration tests keep the shipped configuration (real local models).
    """
    settings.FOUNDRY_HOME = tmp_path / "home"
    settings.FOUNDRY_ARTIFACTS = settings.FOUNDRY_HOME / "artifacts"
    if request.node.get_closest_marker("integration"):
        return
    settings.FOUNDRY = config_with(
        django_settings.FOUNDRY,
        embedding={"context_model": "none"},
        ingest={"summary_model": "none"},
        retrieval={"hyde": False, "scorer_model": "none"},
        generation={"model": "scripted/generator"},
    )


@pytest.fixture
def kb(tmp_path: Path) -> Path:
    """An empty knowledge-base folder."""
    folder = tmp_path / "kb"
    folder.mkdir()
    return folder


def make_pdf(path: Path, pages: list[tuple[str, str]], *, title: str = "Test PDF") -> Path:
    """Write a PDF with one outline entry and one text block per page: [(heading, text), …]."""
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_title(title)
    pdf.set_font("Helvetica", size=11)
    for heading, text in pages:
        pdf.add_page()
        pdf.start_section(heading, level=0)
        pdf.multi_cell(0, 6, heading)
        pdf.ln(4)
        pdf.multi_cell(0, 6, text)
    pdf.output(str(path))
    return path
