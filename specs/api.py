"""``/api/v1/specs``: the approved feature specs generation can use; ``POST /api/v1/generate``.

No ``auth`` is set here, so the router inherits whatever the NinjaAPI in
``foundry_site/api.py`` requires; token auth added there covers these endpoints too.
"""

from __future__ import annotations

from django.db.models import QuerySet
from django.urls import reverse
from ninja import Router
from ninja.pagination import paginate

from core.pagination import PageNumberPagination
from core.requests import ApiRequest
from specs import selectors
from specs.models import SpecVersion
from specs.runs import generation_start
from specs.schemas import ApprovedSpecOut, GenerateIn, RunAccepted

router = Router(tags=["specs"])
# Mounted at the API root: POST /api/v1/generate. It lives here because choosing
# the approved spec needs ``specs``, which ``generation`` may not import.
generate_router = Router(tags=["generation"])


@router.get("", response=list[ApprovedSpecOut])
@paginate(PageNumberPagination, page_size=50)
def list_approved_specs(request: ApiRequest) -> QuerySet[SpecVersion]:
    """Approved specs by name, each with the version generation uses (`--feature NAME`)."""
    return selectors.approved_versions()


@generate_router.post("/generate", response={202: RunAccepted})
def start_generation(request: ApiRequest, body: GenerateIn) -> tuple[int, dict]:
    """Start writing a document on ``topic`` following the approved spec ``feature``.

    ``feature`` may be left out when exactly one spec is approved. Answers at once, the run
    ``pending`` or ``running``: poll ``GET /runs/{run_id}`` until ``succeeded``, ``needs_review``
    or ``failed``; fetch the file from ``GET /runs/{run_id}/download``.
    400: no single approved spec applies, or an empty topic; 404: unknown spec.
    """
    run = generation_start(user=request.auth, topic=body.topic, feature=body.feature)
    run.refresh_from_db(fields=["status"])
    return 202, {"run_id": run.pk, "status": run.status, "url": reverse("api:get_run", args=[run.pk])}
