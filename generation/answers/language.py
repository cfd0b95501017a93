"""The language an answer's own words are in: the question's, whatever the interface's.

A Dutch question gets its refusal and its low-confidence note in Dutch even on an English page, in the
JSON API and in a chat client, because the asker wrote Dutch; the rest of a page stays in the interface
language the reader chose. Only the human text follows: the answer class and refusal codes never change.

A question too short or too mixed to tell (``"sensors"``, ``"pump relief valve"``) keeps the interface
language, so the asker's own choice decides rather than a guess.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings
from django.utils import translation

from core import language


def interface_language() -> str:
    """The active interface language as one of ``settings.LANGUAGES``' codes (``en`` outside a request)."""
    active = (translation.get_language() or settings.LANGUAGE_CODE).split("-")[0]
    codes = {code for code, _ in settings.LANGUAGES}
    return active if active in codes else settings.LANGUAGE_CODE


def question_language(question: str) -> str:
    """The language ``question``'s answer speaks: the question's when the detector is sure of it
    (``core.language.detect``), else the interface's."""
    return language.detect(question, prior=interface_language())


@contextmanager
def answering_in(question: str) -> Iterator[str]:
    """Within it, ``gettext`` speaks ``question``'s language (``question_language``); yields its code."""
    code = question_language(question)
    with translation.override(code):
        yield code
