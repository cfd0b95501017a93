"""Starting a generation run for a signed-in user (the generate page and ``POST /api/v1/generate``).

This lives in ``specs`` because it resolves the approved spec, and ``generation``
may not import ``specs`` (dependency direction).
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from core.jobs import is_eager
from generation import background
from generation.documents import GenerationError, SpecText
from generation.pipeline import generation_run_create
from generation.models import GenerationRun
from generation.tasks import generate_document
from sources.selectors import query_scope
from specs.selectors import spec_for_generation


def generation_start(*, user: Any, topic: str, feature: str | None = None) -> GenerationRun:
    """Create a pending run over the user's collections and start it once the transaction commits.

    Raises ``SpecError`` when no single approved spec applies and ``GenerationError``
    for an empty topic or a user who can read no collection. The document goes to
    the default path, FOUNDRY_HOME/outputs/run-<id>.md. Returns at once: with a broker
    a worker runs it; without one a thread of this process does (``generation.background``).
    """
    selected = spec_for_generation(feature or None)
    scope = query_scope(user)
    if scope == []:
        # Refused here: a run stores [] for "no limit", so an empty scope must never be saved.
        raise GenerationError("You cannot read any collection yet, so there is nothing to write from.")
    run = generation_run_create(
        topic=topic, spec=SpecText(selected.name, selected.version, selected.body), user=user, collection_ids=scope
    )
    if is_eager():
        run_id = run.pk
        transaction.on_commit(lambda: background.run_submit(run_id))
    else:
        generate_document.delay_on_commit(run.pk)
    return run
