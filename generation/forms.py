from __future__ import annotations

from django import forms

from generation.answers import MAX_QUESTION_CHARS


class AskForm(forms.Form):
    question = forms.CharField(
        max_length=MAX_QUESTION_CHARS,
        strip=True,
        widget=forms.Textarea(attrs={"rows": 3, "placeholder": "Ask about your documents…", "autofocus": True}),
    )
