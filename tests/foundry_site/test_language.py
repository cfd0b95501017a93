"""The language layer: detection, per-language analyzers from data files."""

from __future__ import annotations

import json

import pytest

from core import language


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("How many sensors can be connected to the bus?", "en"),
        ("Hoeveel sensoren kunnen op de bus worden aangesloten?", "nl"),
        ("Wie viele Sensoren können an den Bus angeschlossen werden?", "de"),
        ("Welke kabel moet ik gebruiken voor de sensorbus?", "nl"),
        ("Welches Kabel soll ich für den Sensorbus verwenden?", "de"),
    ],
)
def test_detect_tells_the_supported_languages_apart(text: str, code: str) -> None:
    assert language.detect(text) == code


def test_detect_gives_the_default_to_text_without_letters() -> None:
    assert language.detect("192.168.10.50 / 24") == language.DEFAULT
    assert language.detect("") == language.DEFAULT


def test_analyzers_read_their_data_files() -> None:
    for code in language.SUPPORTED:
        data = json.loads((language.DATA / f"{code}.json").read_text(encoding="utf-8"))
        analyzer = language.analyzer(code)
        assert analyzer.stop_words == frozenset(data["stop_words"])
        assert analyzer.question_words <= analyzer.stop_words | frozenset(data["question_words"])


def test_an_unsupported_language_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="'fr' is not supported; supported: en, nl, de"):
        language.analyzer("fr")


def test_stems_fold_inflections_per_language() -> None:
    de = language.analyzer("de")
    assert de.stems("die Netzwerke") == de.stems("dem Netzwerk")
    nl = language.analyzer("nl")
    assert nl.stems("de aansluitingen") == nl.stems("een aansluiting")
    en = language.analyzer("en")
    assert en.stems("the connected sensors") == en.stems("connecting a sensor")


def test_a_hyphenated_compound_also_gives_its_parts() -> None:
    de = language.analyzer("de")
    stems = de.stems("im IRC-Netzwerk")
    assert de.stem("netzwerk") in stems and de.stem("irc-netzwerk") in stems


def test_stop_words_of_every_language_for_text_of_no_known_language() -> None:
    words = language.all_stop_words()
    assert {"the", "de", "der", "und", "het"} <= words


def test_a_text_too_short_to_tell_takes_the_prior() -> None:
    assert language.detect("Und E04?") == language.DEFAULT
    assert language.detect("Und E04?", prior="nl") == "nl"
    assert language.detect("Reset?", prior="de") == "de"
    assert language.detect("Was bedeutet der Fehler E04 auf der Anzeige?", prior="nl") == "de"
