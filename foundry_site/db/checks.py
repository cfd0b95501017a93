"""System check: the database must offer FTS5 and sqlite-vec's vec0."""
from __future__ import annotations

from typing import Any

from django.core.checks import CheckMessage, Error, register
from django.db import connection


@register()
def check_sqlite_extensions(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    errors: list[CheckMessage] = []
    with connection.cursor() as cur:
        try:
            cur.execute("SELECT vec_version()")
        except Exception as exc:  # any failure here means vec0 is unusable
            errors.append(Error(f"sqlite-vec (vec0) is not available: {exc}", id="foundry.E001",
                                hint="Install sqlite-vec and use ENGINE 'foundry_site.db'."))
        cur.execute("SELECT sqlite_compileoption_used('ENABLE_FTS5')")
        if not cur.fetchone()[0]:
            errors.append(Error("SQLite was built without FTS5.", id="foundry.E002",
                                hint="Install pysqlite3-binary, which ships FTS5."))
    return errors


@register()
def check_models(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Every configured model must be usable: known local model, or its provider's API key set."""
    from django.conf import settings

    from foundry_site import llm

    models = settings.FOUNDRY.llm_models() | {settings.FOUNDRY.embedding.model}
    return [Error(problem, id="foundry.E003", hint="Fix foundry.yaml or set the provider's API key variable.")
            for problem in llm.validate_models(models)]
