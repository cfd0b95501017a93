"""Authentication for the JSON API: a bearer token, or the browser's session.

Session auth checks CSRF on unsafe methods, because a browser sends the session
cookie with any cross-site form post. A request with no credentials at all gets
401 (not a CSRF 403), so clients learn they need to authenticate.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpRequest
from ninja.errors import HttpError
from ninja.security import APIKeyCookie, HttpBearer
from ninja.utils import check_csrf

from foundry_site.services.tokens import token_authenticate


class BearerTokenAuth(HttpBearer):
    """``Authorization: Bearer <token>`` with a token from ``foundry tokens create``."""

    def authenticate(self, request: HttpRequest, token: str) -> Any:
        return token_authenticate(token)


class SessionCsrfAuth(APIKeyCookie):
    """The Django session of a signed-in browser; CSRF is enforced for unsafe methods."""

    param_name = settings.SESSION_COOKIE_NAME

    def __init__(self) -> None:
        # CSRF is checked in authenticate(), after we know a session user exists.
        super().__init__(csrf=False)

    def authenticate(self, request: HttpRequest, key: str | None) -> Any:
        user = getattr(request, "user", None)
        if user is None or not user.is_authenticated:
            return None
        if check_csrf(request) is not None:
            raise HttpError(403, "CSRF check failed")
        return user
