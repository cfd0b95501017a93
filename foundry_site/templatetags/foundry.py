"""Small display filters shared by the pages."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django import template
from django.utils.translation import pgettext

from generation.present import row_badge

if TYPE_CHECKING:  # django-stubs' type of a lazy translation; a dev requirement only
    from django_stubs_ext import StrOrPromise

register = template.Library()


@register.filter
def percent(value: Any) -> str:
    """0.834 → "83%"; None → "—"."""
    if value is None or value == "":
        return "—"
    return f"{float(value):.0%}"


@register.filter
def ms(value: Any) -> str:
    """Milliseconds for people: 850 → "850 ms", 2400 → "2.4 s"."""
    if value is None or value == "":
        return "—"
    value = float(value)
    return f"{value:.0f} ms" if value < 1000 else f"{value / 1000:.1f} s"


@register.filter
def join_or(names: Any) -> str:
    """["ann", "bob"] → "ann or bob", the "or" in the active language."""
    word = pgettext("between two names", "or")
    return f" {word} ".join(str(n) for n in names)


@register.filter
def get_item(mapping: Any, key: str) -> Any:
    return mapping.get(key) if isinstance(mapping, dict) else None


@register.filter
def verdict_of(feedback: Any, user: Any) -> str:
    """The newest verdict ``user`` gave in ``feedback`` (newest first), or "" if none."""
    user_id = getattr(user, "pk", None)
    return next((f.verdict for f in feedback if user_id is not None and f.user_id == user_id), "")


@register.filter
def replaced_votes(feedback: Any) -> set[int]:
    """The rows of ``feedback`` (newest first) that a later verdict of the same user replaced."""
    seen: set[int] = set()
    replaced: set[int] = set()
    for f in feedback:
        if f.user_id is not None and f.user_id in seen:
            replaced.add(f.pk)
        seen.add(f.user_id)
    return replaced


@register.filter
def badge(row: Any) -> tuple[str, StrOrPromise]:
    """A query-log row's badge as the ask page shows it, (CSS class, label) (``present.row_badge``)."""
    return row_badge(row)
