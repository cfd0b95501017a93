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

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        # No maxlength: the browser would cut a longer paste silently. The page counts down to the limit
        # instead (data-max-chars), and the form refuses a longer question saying by how much.
        attrs = self.fields["question"].widget.attrs
        attrs.pop("maxlength", None)
        attrs.update({"data-max-chars": MAX_QUESTION_CHARS, "aria-describedby": "question-count"})
