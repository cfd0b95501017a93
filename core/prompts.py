"""Prompt templates live in files (``prompts.*`` in foundry.yaml), overridable per project."""

from __future__ import annotations

import re
from pathlib import Path

from django.conf import settings

_PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")
# What each template must hand the model: without it a query or a run would go on without its
# question or its passages (checked at startup, ``foundry_site.db.checks``).
REQUIRED = {
    "answer_system": ("context",),
    "answer_user": ("question",),
    "generate_system": ("feature_spec_content", "retrieved_chunks"),
    "hyde": ("question",),
    "conflicts": ("passages",),
    "relevance": ("question", "passages"),
    "context_prefix": ("chunk",),
    "summary": ("document",),
    "condense": ("history", "message"),
}


def missing_placeholders(name: str) -> list[str]:
    """The placeholders of REQUIRED[name] that template ``name`` lacks (its file must be readable)."""
    found = set(_PLACEHOLDER.findall(template_path(name).read_text(encoding="utf-8")))
    return [key for key in REQUIRED.get(name, ()) if key not in found]


def template_path(name: str) -> Path:
    path = Path(getattr(settings.FOUNDRY.prompts, name))
    return path if path.is_absolute() else settings.BASE_DIR / path


def render(name: str, **values: object) -> str:
    """Fill ``{placeholder}``s of template ``name``; unknown braces (e.g. JSON examples) stay as written."""
    path = template_path(name)
    try:
        template = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise FileNotFoundError(f"prompt template prompts.{name} ({path}) cannot be read: {exc.strerror}") from None
    return _PLACEHOLDER.sub(lambda m: str(values[m.group(1)]) if m.group(1) in values else m.group(0), template)
