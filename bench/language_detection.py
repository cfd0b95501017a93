"""How sure language detection must be before Foundry believes it (``data/detection.json``).

Reads every question of the given JSON sets (any string value ending in "?"), whose language is
known (``--lang``), and prints how many the detector takes for another language at each
probability, so ``min_probability`` can be set where no known question is misread.

    .venv/bin/python bench/language_detection.py --lang en tests/data/followups*.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from core import language  # noqa: E402


def questions(paths: list[str]) -> list[str]:
    found: dict[str, None] = {}

    def walk(value: object) -> None:
        if isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)
        elif isinstance(value, str) and value.rstrip().endswith("?"):
            found[value] = None

    for path in paths:
        walk(json.loads(Path(path).read_text(encoding="utf-8")))
    return list(found)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lang", required=True, choices=language.SUPPORTED)
    parser.add_argument("paths", nargs="+")
    args = parser.parse_args()
    identifier = language._identifier()
    asked = questions(args.paths)
    misread = sorted(p for q in asked for code, p in [identifier.classify(q)] if code != args.lang)
    print(f"{len(asked)} questions, {len(misread)} taken for another language")
    for floor in (0.5, 0.6, 0.7, 0.8, 0.9):
        kept = sum(1 for q in asked if identifier.classify(q)[1] >= floor)
        wrong = sum(1 for p in misread if p >= floor)
        print(f"min_probability {floor:.1f}: believed {kept}, misread {wrong}")


if __name__ == "__main__":
    main()
