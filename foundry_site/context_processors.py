"""The navigation bar. Pages that do not exist yet show as plain text until their URL name is added."""

from __future__ import annotations

from django.http import HttpRequest
from django.urls import NoReverseMatch, reverse

# (label, URL name). Ask, Query log and Generate appear as links as soon as a
# URL with that name exists.
NAV = [("Ask", "ask"), ("Sources", "sources:list"), ("Query log", "querylog"), ("Generate", "generate")]


def navigation(request: HttpRequest) -> dict:
    items = []
    for label, name in NAV:
        try:
            url = reverse(name)
        except NoReverseMatch:
            url = None
        active = url is not None and (request.path == url if url == "/" else request.path.startswith(url))
        items.append({"label": label, "url": url, "active": active})
    user = getattr(request, "user", None)
    if user is not None and user.is_active and user.is_staff:
        items.append({"label": "Admin", "url": reverse("admin:index"), "active": False})
    return {"nav_items": items}
