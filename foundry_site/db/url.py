"""``FOUNDRY_DATABASE_URL``: the PostgreSQL database that replaces the SQLite file when it is set.

Only a PostgreSQL URL is accepted (``postgresql://`` or ``postgres://``), over TCP
(``postgresql://user:password@host:5432/foundry``) or a Unix socket folder
(``postgresql://user@/foundry?host=/run/postgresql``); query parameters other than ``host`` and
``port`` go to the driver (``sslmode=require``). Anything else stops startup with an error naming
the variable, because a typo must not quietly fall back to SQLite.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from django.core.exceptions import ImproperlyConfigured

VARIABLE = "FOUNDRY_DATABASE_URL"
ENGINE = "foundry_site.db.postgresql"
SCHEMES = ("postgresql", "postgres")


def database_from_url(url: str, *, conn_max_age: int = 0) -> dict[str, Any]:
    """The Django ``DATABASES["default"]`` entry for a PostgreSQL ``url``; ImproperlyConfigured naming the
    variable and the reason when the URL is not one."""
    parts = urlsplit(url)
    if parts.scheme not in SCHEMES:
        raise ImproperlyConfigured(
            f"{VARIABLE} must be a PostgreSQL URL (postgresql://user:password@host:port/database, or "
            "postgresql://user@/database?host=/run/postgresql for a socket); its scheme is "
            f"{parts.scheme or 'missing'!r}. Unset it to use the SQLite file (FOUNDRY_DB)."
        )
    name = unquote(parts.path.lstrip("/"))
    if not name or "/" in name:
        where = url.split("@")[-1]
        raise ImproperlyConfigured(f"{VARIABLE} names no database: put its name after the host ({where!r})")
    options = dict(parse_qsl(parts.query, keep_blank_values=True))
    host = options.pop("host", "") or unquote(parts.hostname or "")
    port = options.pop("port", "") or (str(parts.port) if parts.port else "")
    return {
        "ENGINE": ENGINE,
        "NAME": name,
        "USER": unquote(parts.username or ""),
        "PASSWORD": unquote(parts.password or ""),
        "HOST": host,
        "PORT": port,
        "CONN_MAX_AGE": conn_max_age,
        "CONN_HEALTH_CHECKS": conn_max_age > 0,
        "OPTIONS": options,
    }
