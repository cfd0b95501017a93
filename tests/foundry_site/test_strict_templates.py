"""The test suite's templates fail loudly (tests/strict_templates.py), for our templates only."""

from __future__ import annotations

import pytest
from django.template import Context, Template, engines

from tests.strict_templates import StrictTemplateError


class Boom:
    def __bool__(self) -> bool:
        raise ValueError("evaluating this raised")


def test_an_undefined_variable_raises() -> None:
    with pytest.raises(StrictTemplateError, match="missing"):
        Template("Hello {{ missing }}").render(Context({}))


def test_an_undefined_variable_inside_if_and_for_is_allowed() -> None:
    text = Template("{% if missing %}x{% endif %}{% for i in missing %}{{ i }}{% endfor %}ok").render(Context({}))
    assert text == "ok"


def test_an_if_operand_that_raises_is_not_swallowed() -> None:
    # Django's default: `{% if boom and True %}` quietly evaluates to False.
    with pytest.raises(StrictTemplateError, match="evaluating this raised"):
        Template("{% if boom and ok %}yes{% endif %}").render(Context({"boom": Boom(), "ok": True}))


def test_defined_variables_and_filters_still_render() -> None:
    text = Template('{{ name|upper }} {{ none|default:"-" }} {% if a and not b %}y{% endif %}').render(
        Context({"name": "ax", "none": None, "a": 1, "b": 0})
    )
    assert text == "AX - y"


def test_djangos_own_templates_keep_their_forgiving_lookups() -> None:
    # The admin relies on undefined variables rendering as "": an admin template still renders.
    template = engines["django"].get_template("admin/filter.html")  # {{ title }} is undefined here
    assert 'data-filter-title=""' in template.render({})
