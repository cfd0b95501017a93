"""Write docs/configuration.md from the config schema (core/config.py): every key of
``foundry.yaml`` with its type, its default and its meaning (the key's docstring).

    python scripts/config_reference.py           # writes docs/configuration.md
    python scripts/config_reference.py --check   # exit 1 when the committed file differs

A key without a docstring stops the script, naming it: the reference never lists a key unexplained.
tests/foundry_site/test_docs_reference.py fails while the committed page differs from what this writes.
"""

from __future__ import annotations

import argparse
import sys
import types
import typing
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pydantic import BaseModel  # noqa: E402
from pydantic.fields import FieldInfo  # noqa: E402

from core import model_thresholds  # noqa: E402
from core.config import FoundryConfig  # noqa: E402

PAGE = ROOT / "docs" / "configuration.md"

HEADER = """\
# Configuration: `foundry.yaml`

<!-- Written by scripts/config_reference.py from core/config.py; edit the keys' docstrings there,
     then run the script. A test fails while this page differs from what the script writes. -->

The pipeline's knobs. Every key is optional: a missing file, section or key takes the default below. An
unknown key or a value out of range stops startup with the key, the value and what is allowed. Any LLM role
(`embedding.context_model`, `ingest.summary_model`, `retrieval.hyde_model`, `retrieval.scorer_model`,
`retrieval.condense_model`, `generation.model`) can be `none` to switch its step off. The file the
repository ships writes every key with its default. `FOUNDRY_CONFIG` names another file; deployment settings
(home, database, broker, secrets) are environment variables ([installation.md](installation.md)).

Thresholds marked *per model* read the embedding model's similarity scale: left out of `foundry.yaml`, they
take the configured `embedding.model`'s calibrated value from `core/data/embedding_thresholds.json`
(the default shown is all-MiniLM-L6-v2's). The `D00NN` numbers are entries of [decisions.md](decisions.md).
"""


def type_name(annotation: object) -> str:
    """``int``, ``float``, ``str``, ``bool``, ``str or null``, or the choices of a Literal."""
    if typing.get_origin(annotation) is typing.Annotated:
        return type_name(typing.get_args(annotation)[0])
    if typing.get_origin(annotation) is typing.Literal:
        return " \\| ".join(f"`{choice}`" for choice in typing.get_args(annotation))
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        return " or ".join("null" if arg is type(None) else type_name(arg) for arg in typing.get_args(annotation))
    return getattr(annotation, "__name__", str(annotation))


def bounds(field: FieldInfo) -> str:
    """The allowed range from the field's constraints, e.g. ``1 – 100``, ``> 0``."""
    low = high = ""
    for item in field.metadata:
        for name, sign in (("ge", "≥"), ("gt", ">")):
            if getattr(item, name, None) is not None:
                low = f"{sign} {getattr(item, name)}"
        for name, sign in (("le", "≤"), ("lt", "<")):
            if getattr(item, name, None) is not None:
                high = f"{sign} {getattr(item, name)}"
    return ", ".join(part for part in (low, high) if part)


def default_text(value: object) -> str:
    if value is None:
        return "`null`"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    return f"`{value}`"


def section_rows(name: str, section: type[BaseModel], defaults: BaseModel) -> list[str]:
    rows = []
    for key, field in section.model_fields.items():
        if not field.description:
            raise SystemExit(f"config_reference: {name}.{key} has no docstring in core/config.py")
        kind = type_name(field.annotation)
        allowed = bounds(field)
        per_model = " (*per model*)" if f"{name}.{key}" in model_thresholds.KEYS else ""
        meaning = " ".join(field.description.split())
        rows.append(
            f"| `{name}.{key}` | {kind}{f' ({allowed})' if allowed else ''} "
            f"| {default_text(getattr(defaults, key))}{per_model} | {meaning} |"
        )
    return rows


def reference() -> str:
    """The whole page, as the schema and the shipped thresholds give it."""
    defaults = FoundryConfig.build({})
    out = [HEADER]
    for name, field in FoundryConfig.model_fields.items():
        section = field.annotation
        assert isinstance(section, type) and issubclass(section, BaseModel), name
        doc = " ".join((section.__doc__ or "").split())
        out.append(f"## `{name}`\n")
        if doc:
            out.append(f"{doc}\n")
        out.append("| key | type | default | meaning |\n|---|---|---|---|")
        out.extend(section_rows(name, section, getattr(defaults, name)))
        out.append("")
    return "\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the committed page differs")
    args = parser.parse_args()
    text = reference()
    if args.check:
        if PAGE.read_text(encoding="utf-8") != text:
            print(f"{PAGE} differs from the schema: run python scripts/config_reference.py", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(text, encoding="utf-8")
    print(f"wrote {PAGE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
