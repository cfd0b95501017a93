"""The navigation bar. Pages that do not exist yet show as plain text until their URL name is added."""

from __future__ import annotations

from django.http import HttpRequest
from django.urls import NoReverseMatch, reverse
from django.utils.translation import gettext_lazy as _

# (label, URL name, names of further pages it is active on). Ask, Query log and Generate appear as links
# as soon as a URL with that name exists.
NAV = [
    (_("Ask"), "ask", ("conversations",)),  # a conversation is the ask page's
    (_("Sources"), "sources:list", ()),
    (_("Query log"), "querylog", ()),
    (_("Generate"), "generate", ("runs",)),  # a run is what the generate page started
]


def _url(name: str) -> str | None:
    try:
        return reverse(name)
    except NoReverseMatch:
        return None


def navigation(request: HttpRequest) -> dict:
    items = []
    for label, name, also in NAV:
        url = _url(name)
        paths = [p for p in (url, *map(_url, also)) if p is not None]
        active = url is not None and any(request.path == p if p == "/" else request.path.startswith(p) for p in paths)
        items.append({"label": label, "url": url, "active": active})
    user = getattr(request, "user", None)
    if user is not None and user.is_active and user.is_staff:
        items.append({"label": _("Admin"), "url": reverse("admin:index"), "active": False})
    return {"nav_items": items}
