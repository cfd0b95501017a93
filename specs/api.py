"""``/api/v1/specs``: the approved feature specs generation can use.

No ``auth`` is set here, so the router inherits whatever the NinjaAPI in
``foundry_site/api.py`` requires; token auth added there covers these endpoints too.
"""
from __future__ import annotations

from django.db.models import QuerySet
from django.http import HttpRequest
from ninja import Router
from ninja.pagination import paginate

from specs import selectors
from specs.models import SpecVersion
from specs.schemas import ApprovedSpecOut

router = Router(tags=["specs"])


@router.get("", response=list[ApprovedSpecOut])
@paginate
def list_approved_specs(request: HttpRequest) -> QuerySet[SpecVersion]:
    """Approved specs by name, each with the version generation uses (`--feature NAME`)."""
    return selectors.approved_versions()
