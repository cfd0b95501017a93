"""Fixtures for generation tests: a small indexed corpus with a deliberate VCC conflict."""
from __future__ import annotations

from pathlib import Path

import pytest

from sources.services.ingest import knowledge_base_ingest

MANUAL = """# AX-200 Manual

## Power supply

The gateway accepts a main input of 12 to 24 V DC through terminal X1.
The internal logic supply is VCC = 3.3 V.

## Sensor bus

Up to 8 sensors can be connected to the RS-485 bus.
The bus must be terminated with 120 Ohm at both ends.
"""
DATASHEET = "# AX-200 Datasheet\n\n## Power\n\nThe internal logic supply is VCC = 5 V.\n"


@pytest.fixture
def indexed(kb: Path, foundry_config) -> Path:
    # A three-chunk corpus has one relevant chunk per question; the seed's min_chunks=2 would refuse all.
    foundry_config(retrieval={"min_chunks": 1})
    (kb / "manual.md").write_text(MANUAL)
    (kb / "datasheet.md").write_text(DATASHEET)
    knowledge_base_ingest(target=kb)
    return kb


