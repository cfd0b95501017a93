"""Create, check and revoke API tokens."""

from __future__ import annotations

import hashlib
import logging
import secrets
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

from django.contrib.auth import get_user_model
from django.utils import timezone

from foundry_site.models import ApiToken

if TYPE_CHECKING:
    from django.contrib.auth.models import User

logger = logging.getLogger(__name__)

TOKEN_PREFIX = "fdy_"
# Recording every use would turn each API read into a database write; once a
# minute is enough to tell a live token from a forgotten one.
LAST_USED_RESOLUTION = timedelta(minutes=1)


# Why a request was refused (401), for /api/v1/, /v1/ and MCP: the caller learns what to fix. Telling a revoked
# token from an unknown one tells nothing to a guesser: only the holder of the real token can see "revoked".
GET_TOKEN = "an administrator creates one with `foundry tokens create USER`"
NEEDS_TOKEN = f"Authentication required: send Authorization: Bearer <token> ({GET_TOKEN})."
TOKEN_MALFORMED = (
    f"The bearer token sent is malformed: a Foundry token starts with {TOKEN_PREFIX} and is at most "
    f"{{limit}} characters; send the whole token as printed when it was created ({GET_TOKEN})."
)
TOKEN_UNKNOWN = f"The bearer token sent is unknown: no Foundry token has that value ({GET_TOKEN})."
TOKEN_REVOKED = f"The bearer token sent was revoked; ask for a new one ({GET_TOKEN})."
TOKEN_USER_INACTIVE = "The bearer token sent belongs to a deactivated user; an administrator can reactivate them."
TOKEN_MAX_CHARS = 200


class TokenError(ValueError):
    """A token command cannot be carried out (unknown user or token, already revoked)."""


@dataclass(frozen=True)
class NewToken:
    token: ApiToken
    plain: str


def token_hash(plain: str) -> str:
    return hashlib.sha256(plain.encode("utf-8")).hexdigest()


def token_create(*, username: str, name: str = "") -> NewToken:
    """Create a token for ``username``. The plain token exists only in the return value."""
    user = get_user_model().objects.filter(username=username).first()
    if user is None:
        raise TokenError(f"no user named {username!r}")
    if not user.is_active:
        raise TokenError(f"user {username!r} is inactive")
    plain = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(
        user=user, name=name, token_hash=token_hash(plain), prefix=plain[: len(TOKEN_PREFIX) + 6]
    )
    logger.info("api token created id=%s user=%s", token.pk, user.pk)
    return NewToken(token, plain)


def token_revoke(*, token_id: int) -> ApiToken:
    """Revoke a token. Revoking a revoked token is an error, so a typo in the id is noticed."""
    token = ApiToken.objects.filter(pk=token_id).first()
    if token is None:
        raise TokenError(f"no API token with id {token_id}")
    updated = ApiToken.objects.filter(pk=token_id, revoked_at__isnull=True).update(revoked_at=timezone.now())
    if not updated:
        raise TokenError(f"API token {token_id} is already revoked")
    token.refresh_from_db()
    logger.info("api token revoked id=%s", token.pk)
    return token


def bearer_authenticate(authorization: str) -> tuple[User | None, str]:
    """The user of an ``Authorization`` header's bearer token, or None and why (``NEEDS_TOKEN`` when there is
    none; see ``token_check``)."""
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None, NEEDS_TOKEN
    return token_check(token.strip())


def token_check(plain: str) -> tuple[User | None, str]:
    """The active user owning the unrevoked token ``plain`` and "", else None and why: the token is malformed,
    unknown, revoked, or its user deactivated. Records the use (at most once a minute)."""
    if not plain.startswith(TOKEN_PREFIX) or len(plain) > TOKEN_MAX_CHARS:
        return None, TOKEN_MALFORMED.format(limit=TOKEN_MAX_CHARS)
    token = ApiToken.objects.select_related("user").filter(token_hash=token_hash(plain)).first()
    if token is None:
        return None, TOKEN_UNKNOWN
    if token.revoked_at is not None:
        return None, TOKEN_REVOKED
    if not token.user.is_active:
        return None, TOKEN_USER_INACTIVE
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at > LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
    return token.user, ""


def token_authenticate(plain: str) -> User | None:
    """The active user owning the unrevoked token ``plain``, else None (``token_check`` says why)."""
    return token_check(plain)[0] if plain else None
