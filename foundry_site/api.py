"""The one NinjaAPI, mounted at /api/v1/. Each app contributes a Router from its api.py."""
from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from ninja import NinjaAPI

from foundry_site import llm
from specs.api import router as specs_router
from specs.errors import SpecError

api = NinjaAPI(title="Foundry API", version="1", urls_namespace="api")


@api.exception_handler(llm.ModelUnavailable)
def model_unavailable(request: HttpRequest, exc: llm.ModelUnavailable) -> HttpResponse:
    return api.create_response(request, {"detail": str(exc)}, status=503)


@api.exception_handler(llm.LLMError)
def model_failed(request: HttpRequest, exc: llm.LLMError) -> HttpResponse:
    return api.create_response(request, {"detail": str(exc)}, status=503 if exc.transient else 502)


@api.exception_handler(SpecError)
def spec_error(request: HttpRequest, exc: SpecError) -> HttpResponse:
    # Each spec error class carries its status: 400 bad input or selection, 403, 404, 409 state.
    return api.create_response(request, {"detail": str(exc)}, status=exc.status_code)


# Routers are mounted here, one per app (sources, retrieval, generation, specs).
api.add_router("/specs", specs_router)
