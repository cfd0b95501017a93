"""Templates fail loudly in tests.

Django's template language forgives two kinds of mistakes, which is right for a live
site and wrong for tests, where they hide bugs:

- ``{{ name }}`` (outside ``{% if %}``/``{% for %}``) for a variable the view did not
  pass renders as an empty string;
- ``{% if a and b %}`` (any operator) turns an exception raised while evaluating an
  operand into ``False``. ``{% if recent and not row %}`` hid the ask page's "Your recent
  questions" box for everyone: evaluating the queryset raised a FieldError.

``enable()`` makes both raise ``StrictTemplateError`` for the project's own templates
(files under the repository, and templates built from strings in tests). Django's own
templates (the admin's) keep their forgiving behaviour: they rely on it.
"""

from __future__ import annotations

import contextvars
from pathlib import Path
from typing import Any

from django.conf import settings
from django.template import base, smartif
from django.template.base import VariableDoesNotExist

_STRICT: contextvars.ContextVar[bool] = contextvars.ContextVar("strict_template_variable", default=False)
_enabled = False


class StrictTemplateError(Exception):
    """A template used a variable that does not exist, or an ``{% if %}`` operand raised."""


def _ours(context: Any) -> bool:
    template = getattr(getattr(context, "render_context", None), "template", None) or getattr(context, "template", None)
    origin = getattr(getattr(template, "origin", None), "name", None)
    if origin is None or origin == base.UNKNOWN_SOURCE:
        return origin == base.UNKNOWN_SOURCE
    # The project's templates folder, not the whole checkout: a virtualenv inside the checkout holds Django's own.
    return Path(str(origin)).resolve().is_relative_to((Path(settings.BASE_DIR) / "templates").resolve())


def _template_name(context: Any) -> str:
    template = getattr(getattr(context, "render_context", None), "template", None) or getattr(context, "template", None)
    return str(getattr(getattr(template, "origin", None), "name", "?"))


def enable() -> None:
    """Patch Django's template engine for this process (idempotent)."""
    global _enabled
    if _enabled:
        return
    _enabled = True
    original_filter_resolve = base.FilterExpression.resolve
    original_variable_resolve = base.Variable.resolve

    def filter_resolve(self: base.FilterExpression, context: Any, ignore_failures: bool = False) -> Any:
        token = _STRICT.set(not ignore_failures and _ours(context))
        try:
            return original_filter_resolve(self, context, ignore_failures)
        finally:
            _STRICT.reset(token)

    def variable_resolve(self: base.Variable, context: Any) -> Any:
        strict = _STRICT.get()
        token = _STRICT.set(False)  # lookups inside (a method rendering another template) decide for themselves
        try:
            return original_variable_resolve(self, context)
        except VariableDoesNotExist as exc:
            if strict:
                raise StrictTemplateError(
                    f"{_template_name(context)}: {{{{ {self.var} }}}} is not defined ({exc})"
                ) from exc
            raise
        finally:
            _STRICT.reset(token)

    base.FilterExpression.resolve = filter_resolve
    base.Variable.resolve = variable_resolve
    for operator in smartif.OPERATORS.values():
        _make_operator_strict(operator)


def _make_operator_strict(operator: type) -> None:
    original_eval = operator.eval
    func = next(cell.cell_contents for cell in original_eval.__closure__ if callable(cell.cell_contents))
    infix = original_eval.__code__.co_names.count("second") > 0

    def strict_eval(self: Any, context: Any) -> Any:
        if not _ours(context):
            return original_eval(self, context)
        try:
            return func(context, self.first, self.second) if infix else func(context, self.first)
        except Exception as exc:
            raise StrictTemplateError(
                f"{_template_name(context)}: an {{% if %}} operand raised {type(exc).__name__}: {exc}"
            ) from exc

    operator.eval = strict_eval
