"""Reads over generation runs: who may see a run, and which file its download may serve."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db.models import QuerySet

from generation.models import GenerationRun


def visible_runs(user: Any) -> QuerySet[GenerationRun]:
    """Staff see every run; anyone else only the runs they started. Others' runs must answer 404."""
    if not user.is_authenticated or not user.is_active:
        return GenerationRun.objects.none()
    runs = GenerationRun.objects.select_related("created_by").order_by("-created_at", "-pk")
    return runs if user.is_staff else runs.filter(created_by=user)


def outputs_root() -> Path:
    return Path(settings.FOUNDRY_HOME) / "outputs"


def run_output_file(run: GenerationRun) -> Path | None:
    """The run's own document, if it exists and lies inside FOUNDRY_HOME/outputs; else None.

    Only the path recorded on the run is ever served (never a path from the request).
    realpath resolves ``..`` and symbolic links, so a path edited in the database, or
    a link swapped in on disk, cannot reach a file outside the outputs folder. Runs
    the CLI wrote elsewhere (``--output``) are therefore not downloadable from the web.
    """
    if run.status != GenerationRun.Status.SUCCEEDED or not run.output_path:
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
