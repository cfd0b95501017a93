from __future__ import annotations

from django import forms
from django.utils.translation import gettext_lazy as _

from generation.answers import MAX_QUESTION_CHARS


class AskForm(forms.Form):
    question = forms.CharField(
        max_length=MAX_QUESTION_CHARS,
        strip=True,
        widget=forms.Textarea(attrs={"rows": 3, "placeholder": _("Ask about your documents…"), "autofocus": True}),
    )
