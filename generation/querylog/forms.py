from __future__ import annotations

from typing import Any

from django import forms
from django.utils.translation import gettext_lazy as _

from generation.models import QueryFeedback, QueryLog
from generation.querylog.selectors import QueryFilters, sees_every_query
from sources.models import Collection
from sources.selectors import readable_collections


def _translated(choices: list[tuple[str, str]]) -> list[tuple[str, Any]]:
    """A model's choices with their labels (marked in the model) translated when the form is shown."""
    return [(value, _(label)) for value, label in choices]


class QueryLogFilterForm(forms.Form):
    """The query-log browser's filters, read from the query string."""

    user = forms.CharField(required=False, max_length=150)
    date_from = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}), label=_("From"))
    date_to = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}), label=_("To"))
    answer_class = forms.ChoiceField(
        required=False, choices=[("", _("any")), *_translated(QueryLog.AnswerClass.choices)], label=_("Answer")
    )
    collection = forms.ModelChoiceField(queryset=Collection.objects.none(), required=False, empty_label=_("any"))
    feedback = forms.ChoiceField(
        required=False,
        choices=[("", _("any")), *_translated(QueryFeedback.Verdict.choices), ("none", _("No feedback"))],
        label=_("Feedback"),
    )
    q = forms.CharField(required=False, max_length=200, label=_("Text"))

    def __init__(self, *args: Any, viewer: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Only a viewer who sees every row can filter by user, or by collections they cannot read.
        everyone = sees_every_query(viewer)
        collection = self.fields["collection"]
        assert isinstance(collection, forms.ModelChoiceField)  # a copy of the field declared above
        collection.queryset = (Collection.objects.all() if everyone else readable_collections(viewer)).order_by("name")
        if not everyone:
            del self.fields["user"]

    def filters(self) -> QueryFilters:
        """The valid filters (an invalid field filters nothing; the form shows its error)."""
        data = self.cleaned_data if self.is_bound and hasattr(self, "cleaned_data") else {}
        collection = data.get("collection")
        return QueryFilters(
            user=data.get("user") or "",
            date_from=data.get("date_from"),
            date_to=data.get("date_to"),
            answer_class=data.get("answer_class") or "",
            collection=collection.pk if collection else None,
            feedback=data.get("feedback") or "",
            q=(data.get("q") or "").strip(),
        )


class FeedbackForm(forms.Form):
    verdict = forms.ChoiceField(choices=QueryFeedback.Verdict.choices)
    note = forms.CharField(required=False, max_length=4000)
