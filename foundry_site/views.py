from __future__ import annotations

import logging

from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse, HttpResponseServerError
from django.shortcuts import redirect, render
from django.templatetags.static import static
from django.urls import NoReverseMatch, reverse
from django.views.decorators.csrf import requires_csrf_token

logger = logging.getLogger(__name__)


def home(request: HttpRequest) -> HttpResponse:
    """The ask page once it exists, the sources page until then."""
    try:
        return redirect(reverse("ask"))
    except NoReverseMatch:
        return redirect("sources:list")


@login_not_required
def favicon(request: HttpRequest) -> HttpResponse:
    """Browsers ask for /favicon.ico on their own; the icon is an SVG among the static files."""
    return redirect(static("foundry/favicon.svg"), permanent=True)


@requires_csrf_token
def server_error(request: HttpRequest) -> HttpResponse:
    """The 500 page with the navigation; plain text if even that page cannot be drawn (e.g. the database is gone)."""
    try:
        return render(request, "500.html", status=500)
    except Exception:
        logger.exception("the 500 page could not be rendered")
        return HttpResponseServerError("Server error (500). The error is in the server log.", content_type="text/plain")
