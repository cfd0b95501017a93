"""The Dutch and German catalogues are complete, and the compiled .mo files are those of their .po files."""

from __future__ import annotations

import re
from pathlib import Path

import polib
import pytest
from django.conf import settings

LOCALE = Path(settings.BASE_DIR) / "locale"
TRANSLATED = [code for code, _ in settings.LANGUAGES if code != "en"]


def _po(code: str) -> polib.POFile:
    return polib.pofile(str(LOCALE / code / "LC_MESSAGES" / "django.po"))


@pytest.mark.parametrize("code", TRANSLATED)
def test_every_message_is_translated_and_none_is_fuzzy(code: str) -> None:
    po = _po(code)
    assert len(po) > 200  # the interface's messages, not an empty catalogue
    assert [e.msgid for e in po.untranslated_entries()] == []
    assert [e.msgid for e in po.fuzzy_entries()] == []
    assert not po.metadata_is_fuzzy


@pytest.mark.parametrize("code", TRANSLATED)
def test_the_compiled_catalogue_is_the_po_file(code: str) -> None:
    """Compiled with ``manage.py compilemessages`` after every change to the .po (docs/languages.md)."""
    po = _po(code)
    mo = polib.mofile(str(LOCALE / code / "LC_MESSAGES" / "django.mo"))

    def entries(catalogue: polib.POFile | polib.MOFile) -> dict[tuple[str | None, str], object]:
        return {
            (e.msgctxt, e.msgid): (dict(e.msgstr_plural) if e.msgid_plural else e.msgstr)
            for e in catalogue
            if not e.obsolete and "fuzzy" not in e.flags
        }

    assert entries(mo) == entries(po)


@pytest.mark.parametrize("code", TRANSLATED)
def test_placeholders_survive_translation(code: str) -> None:
    """A translation keeps every %(name)s and {name} of its message, or formatting it would fail."""
    placeholder = re.compile(r"%\(\w+\)[sd]|\{\w+(?::[^}]*)?\}")
    for e in _po(code):
        texts = [e.msgstr] if not e.msgid_plural else list(e.msgstr_plural.values())
        for text in texts:
            assert sorted(placeholder.findall(text)) == sorted(placeholder.findall(e.msgid)), e.msgid
