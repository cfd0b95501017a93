"""The one NinjaAPI, mounted at /api/v1/. Each app contributes a Router from its api.py."""
from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from ninja import NinjaAPI

from foundry_site import llm

api = NinjaAPI(title="Foundry API", version="1", urls_namespace="api")


@api.exception_handler(llm.ModelUnavailable)
def model_unavailable(request: HttpRequest, exc: llm.ModelUnavailable) -> HttpResponse:
    return api.create_response(request, {"detail": str(exc)}, status=503)


@api.exception_handler(llm.LLMError)
def model_failed(request: HttpRequest, exc: llm.LLMError) -> HttpResponse:
    return api.create_response(request, {"detail": str(exc)}, status=503 if exc.transient else 502)


# Routers are mounted here, one per app (sources, retrieval, generation, specs).
