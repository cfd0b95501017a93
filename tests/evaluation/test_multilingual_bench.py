"""bench/multilingual.py: the answer match it scores with, and its question files against the pages."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("multilingual_bench", ROOT / "bench" / "multilingual.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_match_ignores_case_space_and_dash_style(bench: ModuleType) -> None:
    assert bench.holds("Choose Extras –  Aktualisieren – Verknüpfungen.", ["aktualisieren - verknüpfungen"])
    assert bench.holds("Press CommandCtrl+F7.", ["Ctrl+F7"])  # the pages glue a shortcut's platform variants


def test_short_expected_strings_match_whole_words_only(bench: ModuleType) -> None:
    assert not bench.holds("Set the width of the section.", ["dt"])
    assert bench.holds("To insert dummy text, type dt, and then press F3.", ["dt"])
    assert not bench.holds("Press F50.", ["F5"])


def test_match_returns_the_alternative_found(bench: ModuleType) -> None:
    assert bench.holds("It is not possible to print it.", ["two parts", "not possible"]) == "not possible"
    assert bench.holds("Nothing here.", ["two parts", "not possible"]) is None


def test_every_expected_string_is_on_its_page_and_not_in_its_question(
    bench: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    assert bench.check(list(bench.LANGUAGES)) == 0, capsys.readouterr().out


@pytest.mark.parametrize("lang", ["en", "nl", "de"])
def test_each_language_has_enough_questions_split_two_to_one(bench: ModuleType, lang: str) -> None:
    dev, blind = (json.loads((bench.DATA / lang / f"{split}.json").read_text()) for split in ("dev", "blind"))
    answerable = len(dev["answerable"]) + len(blind["answerable"])
    assert answerable >= 30
    assert len(dev["unanswerable"]) >= 8
    assert abs(len(dev["answerable"]) - 2 * len(blind["answerable"])) <= 2
    assert all(len(pair["turns"]) == 2 for split in (dev, blind) for pair in split["followups"])
    kinds = ("answerable", "unanswerable", "followups")
    ids = [q["id"] for split in (dev, blind) for kind in kinds for q in split[kind]]
    assert len(ids) == len(set(ids))
