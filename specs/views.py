"""The generate page: a topic and an approved spec start a generation run."""

from __future__ import annotations

from typing import Any

from django import forms
from django.utils.translation import gettext_lazy as _
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from generation.documents import GenerationError
from specs.errors import SpecError
from specs.runs import generation_start
from specs.selectors import approved_versions


class GenerateForm(forms.Form):
    topic = forms.CharField(
        max_length=1000,
        widget=forms.Textarea(attrs={"rows": 2}),
        label=_("Topic"),
        help_text=_("What the document is about; also what the sources are searched for."),
    )
    feature = forms.ChoiceField(label=_("Feature spec"), choices=())

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        feature = self.fields["feature"]
        assert isinstance(feature, forms.ChoiceField)  # a copy of the field declared above
        feature.choices = [(v.spec.name, f"{v.spec.name} v{v.number}: {v.spec.title}") for v in approved_versions()]


@require_http_methods(["GET", "POST"])
def generate(request: HttpRequest) -> HttpResponse:
    form = GenerateForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            run = generation_start(
                user=request.user, topic=form.cleaned_data["topic"], feature=form.cleaned_data["feature"]
            )
        except (SpecError, GenerationError) as exc:
            form.add_error(None, str(exc))
        else:
            return redirect("run", run_id=run.pk)
    status = 400 if request.method == "POST" else 200
    return render(request, "generate/form.html", {"form": form}, status=status)
