"""System checks: the database offers FTS5 and vec0 (on PostgreSQL: pgvector), every configured model is usable, prompt
templates exist, and the index was embedded with the configured embedding model.

``foundry query``, ``generate`` and ``serve`` (and Django's ``check`` and ``runserver``) run
all of them; the other ``foundry`` commands skip the index check (``INDEX_TAG``), because
``foundry ingest`` is how that problem is fixed.
"""

from __future__ import annotations

from typing import Any

from django.core.checks import CheckMessage, Error, register
from django.db import connection

TAG = "foundry"
INDEX_TAG = "foundry_index"


@register(TAG)
def check_sqlite_extensions(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """SQLite has vec0 and FTS5; PostgreSQL (``FOUNDRY_DATABASE_URL``) has the pgvector extension."""
    if connection.vendor == "postgresql":
        return _postgresql_vector()
    errors: list[CheckMessage] = []
    with connection.cursor() as cur:
        try:
            cur.execute("SELECT vec_version()")
        except Exception as exc:  # any failure here means vec0 is unusable
            errors.append(
                Error(
                    f"sqlite-vec (vec0) is not available: {exc}",
                    id="foundry.E001",
                    hint="Install sqlite-vec and use ENGINE 'foundry_site.db'.",
                )
            )
        cur.execute("SELECT sqlite_compileoption_used('ENABLE_FTS5')")
        if not cur.fetchone()[0]:
            errors.append(
                Error(
                    "SQLite was built without FTS5.",
                    id="foundry.E002",
                    hint="Install pysqlite3-binary, which ships FTS5.",
                )
            )
    return errors


def _postgresql_vector() -> list[CheckMessage]:
    """Missing only once the migration that creates the extension has run (``retrieval.0011_pgvector``): on a new
    database ``manage.py migrate``, which runs these checks first, is what creates it."""
    with connection.cursor() as cur:
        cur.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        if cur.fetchone():
            return []
        cur.execute("SELECT to_regclass('django_migrations') IS NOT NULL")
        if not cur.fetchone()[0]:
            return []
        cur.execute("SELECT 1 FROM django_migrations WHERE app = 'retrieval' AND name = '0011_pgvector'")
        if cur.fetchone() is None:
            return []
        cur.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")
        available = cur.fetchone() is not None
    where = connection.settings_dict["NAME"]
    return [
        Error(
            f"PostgreSQL database {where!r} (FOUNDRY_DATABASE_URL) lacks pgvector's extension 'vector'"
            + ("" if available else ", and the server has no pgvector installed"),
            id="foundry.E001",
            hint="Run `manage.py migrate` as a user who may create it, or as a superuser: CREATE EXTENSION vector;"
            if available
            else "Install pgvector on the PostgreSQL server, then CREATE EXTENSION vector; in that database.",
        )
    ]


@register(TAG)
def check_models(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Every configured model must be usable: a known local model of the right kind whose weights are
    installed, or a provider whose API key is set. Each error names the foundry.yaml key."""
    from django.conf import settings

    from core import llm

    return [
        Error(f"{key}: {problem}", id="foundry.E003", hint="Fix foundry.yaml or set the provider's API key variable.")
        for key, (model, role) in settings.FOUNDRY.model_roles().items()
        for problem in llm.validate_models({model}, role=role)
    ]


@register(TAG)
def check_prompt_templates(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Every ``prompts.*`` path in foundry.yaml names a readable file (else the first query would fail)
    holding the placeholders the model needs (``prompts.REQUIRED``)."""
    from django.conf import settings

    from core import prompts

    errors: list[CheckMessage] = []
    for name in type(settings.FOUNDRY.prompts).model_fields:
        path = prompts.template_path(name)
        if not path.is_file():
            errors.append(
                Error(
                    f"prompts.{name}: template file {path} does not exist",
                    id="foundry.E005",
                    hint="Fix the path in foundry.yaml (relative paths start at the project folder).",
                )
            )
            continue
        try:
            missing = prompts.missing_placeholders(name)
        except (OSError, UnicodeDecodeError) as exc:
            errors.append(
                Error(f"prompts.{name}: template file {path} cannot be read as UTF-8 text: {exc}", id="foundry.E005")
            )
            continue
        if missing:
            errors.append(
                Error(
                    f"prompts.{name}: template file {path} lacks " + ", ".join("{" + key + "}" for key in missing),
                    id="foundry.E006",
                    hint="The model would never see what that placeholder carries; put it back.",
                )
            )
    return errors


@register(INDEX_TAG)
def check_embedding_index(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """The ingested sources were embedded with the configured embedding model."""
    from django.conf import settings

    from sources import selectors, vectorstore
    from sources.models import Source

    if Source._meta.db_table not in connection.introspection.table_names():
        return []  # not migrated yet, so nothing is indexed
    model = settings.FOUNDRY.embedding.model
    stale = selectors.stale_embeddings(model=model)
    if not stale:
        return []
    problem = vectorstore.EmbeddingModelChanged(model, stale)
    return [Error(problem.problem, id="foundry.E004", hint=problem.fix)]
