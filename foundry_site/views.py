from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import NoReverseMatch, reverse


def home(request: HttpRequest) -> HttpResponse:
    """The ask page once it exists, the sources page until then."""
    try:
        return redirect(reverse("ask"))
    except NoReverseMatch:
        return redirect("sources:list")
