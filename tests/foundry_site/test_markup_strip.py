"""Markup in a question: taken out before retrieval, its words kept; placeholders and comparisons kept."""

from __future__ import annotations

import pytest

from core.markup import markup_strip


@pytest.mark.parametrize(
    "text,plain",
    [
        ("<script>alert(1)</script> What is the default IP address?", "What is the default IP address?"),
        ("<SCRIPT type='x'>a<b</SCRIPT>What is VCC?", "What is VCC?"),
        ("What is <b>the default</b> baud rate?", "What is the default baud rate?"),
        ("<img src=x onerror=alert(1)>Which terminal?", "Which terminal?"),
        ("Line one<br/>line two<br />", "Line one line two"),
        ("<!-- hidden --> Visible <style>p{}</style>question", "Visible question"),
        ("<p>Closed paragraph</p> <script>alert(1)", "Closed paragraph"),
    ],
)
def test_markup_is_taken_out_and_words_kept(text: str, plain: str) -> None:
    assert " ".join(markup_strip(text).split()) == plain


@pytest.mark.parametrize(
    "text",
    [
        "What does set ip <address> do?",
        "Is a<b and c>d when the pump runs?",
        "Is the current < 5 A or > 2 A?",
    ],
)
def test_text_that_only_looks_like_markup_is_kept(text: str) -> None:
    assert markup_strip(text) == text
