"""Model errors, and the secrets kept out of their messages."""

from __future__ import annotations

import os
import re
import urllib.parse


_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD)", re.IGNORECASE)
_BEARER = re.compile(r"(Bearer\s+|fdy_)[A-Za-z0-9._~+/=-]{8,}")
REDACTED = "[redacted]"


def redact_secrets(text: str) -> str:
    """``text`` without API keys, tokens or an ``llm.api_base`` password this process holds.

    Provider errors sometimes echo the key they were sent ("Incorrect API key provided:
    sk-…"); such a message is stored in the query log and shown on the audit pages, so
    it must not carry the key. Secrets are the values (8+ characters) of environment
    variables named like ``*KEY*``, ``*TOKEN*``, ``*SECRET*``, ``*PASSWORD*``, and bearer tokens.
    """
    secrets = {value for name, value in os.environ.items() if len(value) >= 8 and _SECRET_NAME.search(name)}
    from django.conf import settings

    api_base = settings.FOUNDRY.llm.api_base
    password = urllib.parse.urlsplit(api_base).password if api_base else None
    if password:
        secrets.add(password)
    for secret in sorted(secrets, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    return _BEARER.sub(lambda m: f"{m.group(1)}{REDACTED}", text)


class LLMError(Exception):
    """A model call failed for good (after retries) or returned nothing usable.

    The message never carries an API key or token (see ``redact_secrets``).
    """

    def __init__(self, message: str, *, model: str, transient: bool = False) -> None:
        super().__init__(redact_secrets(message))
        self.model = model
        self.transient = transient


class ModelUnavailable(LLMError):
    """The model cannot be used at all: unknown local model, missing API key, bad name."""
