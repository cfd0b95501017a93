"""Reads over generation runs: who may see a run, and which file its download may serve."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db.models import QuerySet
from django.utils.text import slugify

from generation.models import GenerationRun


AUDIT_PERMISSION = "generation.view_generationrun"


def sees_every_run(user: Any) -> bool:
    """True when ``user`` may read every user's runs (the audit permission, or a superuser).

    Staff status alone is not enough: a run's document and prompt come from its creator's
    collections, and staff (a spec reviewer, say) need not be able to read those.
    """
    return bool(user.is_authenticated and user.is_active and user.has_perm(AUDIT_PERMISSION))


def may_review_grounding(user: Any) -> bool:
    """Whether the run page shows the grounding verdicts (and what they left out) on runs ``user`` sees."""
    return bool(user.is_authenticated and user.is_active and (user.is_staff or sees_every_run(user)))


def visible_runs(user: Any) -> QuerySet[GenerationRun]:
    """Auditors see every run; anyone else only the runs they started. Others' runs must answer 404."""
    if not user.is_authenticated or not user.is_active:
        return GenerationRun.objects.none()
    runs = GenerationRun.objects.select_related("created_by").order_by("-created_at", "-pk")
    return runs if sees_every_run(user) else runs.filter(created_by=user)


def outputs_root() -> Path:
    return Path(settings.FOUNDRY_HOME) / "outputs"


def run_output_file(run: GenerationRun) -> Path | None:
    """The run's own document, if it exists and lies inside FOUNDRY_HOME/outputs; else None.

    Only the path recorded on the run is ever served (never a path from the request).
    realpath resolves ``..`` and symbolic links, so a path edited in the database, or
    a link swapped in on disk, cannot reach a file outside the outputs folder. Runs
    the CLI wrote elsewhere (``--output``) are therefore not downloadable from the web.
    """
    if not run.wrote_document or not run.output_path:
        return None
    root = Path(os.path.realpath(outputs_root()))
    path = Path(os.path.realpath(run.output_path))
    if not path.is_relative_to(root) or path == root or not path.is_file():
        return None
    return path


def run_document(run: GenerationRun) -> str | None:
    """The generated Markdown, when the run's file may be served."""
    path = run_output_file(run)
    return path.read_text(encoding="utf-8", errors="replace") if path else None


DOWNLOAD_NAME_CHARS = 100


def run_download_name(run: GenerationRun) -> str:
    """The file name a download is offered under: spec and topic as a slug, ``wiring-guide-ax-200-gateway.md``.

    Letters of any script are kept (a topic in Greek stays readable); at most 100 characters, cut at a word.
    Never empty: a spec name is itself a slug.
    Where the file is stored does not matter (a run may keep ``run-<id>.md`` on disk).
    """
    slug = slugify(f"{run.spec_name} {run.topic}", allow_unicode=True)
    if len(slug) > DOWNLOAD_NAME_CHARS:
        slug = slug[:DOWNLOAD_NAME_CHARS].rsplit("-", 1)[0]
    return f"{slug}.md"
