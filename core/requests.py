"""The request type of an authenticated API call, for annotations.

django-ninja (and the OpenAI-compatible views, by hand) set ``request.auth`` to the user
that authentication returned; ``HttpRequest`` itself has no such attribute. Endpoints
annotate ``request`` with ``ApiRequest`` so the type checker knows ``auth`` is a signed-in
user. No instance of this class is ever created: the object is Django's own request.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.http import HttpRequest

if TYPE_CHECKING:
    from django.contrib.auth.models import User


class ApiRequest(HttpRequest):
    auth: User
