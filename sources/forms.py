from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.auth.models import AnonymousUser, User
from django.utils.translation import gettext_lazy as _

from sources import selectors
from sources.models import Collection
from sources.services.uploads import ALLOWED_SUFFIXES


class UploadForm(forms.Form):
    # an empty file is refused by ``upload_check``, with the file's name, as every other bad upload is
    file = forms.FileField(
        label=_("File"),
        allow_empty_file=True,
        widget=forms.ClearableFileInput(attrs={"accept": ",".join(ALLOWED_SUFFIXES)}),
    )
    collection: forms.ModelChoiceField[Collection] = forms.ModelChoiceField(
        queryset=None, to_field_name="name", empty_label=None, label=_("Collection")
    )
    replace = forms.BooleanField(required=False, label=_("Replace a file with the same name (new version)"))

    def __init__(self, *args: Any, user: User | AnonymousUser, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        collection = self.fields["collection"]
        assert isinstance(collection, forms.ModelChoiceField)  # a copy of the field declared above
        collection.queryset = selectors.uploadable_collections(user).order_by("name")
