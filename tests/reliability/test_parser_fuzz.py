"""Property-based fuzzing of every extractor, the chunker and the unit splitter (``parser_fuzz.py``).

For each kind ingest reads, hypothesis mutates a small seed file (bytes flipped, inserted,
deleted, repeated, the file cut short; one part of an Office archive mutated inside a good
zip; random Markdown, JSON, CSV and HTML): every input is read or refused with a reason
(``ExtractionError``), never a crash, a hang or unbounded memory, and its chunks keep their
invariants. A bounded number of examples runs here; ``bench/parser_fuzz.py`` runs many more
and docs/reliability.md has its figures. Then a folder of such mutants goes through a real
ingest: each bad file fails on its own row with its reason, the good file beside them is
indexed.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings as django_settings
from hypothesis import HealthCheck, given, settings

from sources.models import Source
from sources.services import enrich
from sources.services.ingest_jobs import knowledge_base_ingest
from tests.reliability import parser_fuzz

pytestmark = pytest.mark.django_db

EXAMPLES = 25  # per kind; bench/parser_fuzz.py runs thousands
KINDS = ("pdf", "docx", "pptx", "xlsx", "csv", "html", "json", "md", "txt", "png")


@pytest.fixture(scope="module")
def seeds(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    return parser_fuzz.seeds(tmp_path_factory.mktemp("seeds"))


@pytest.fixture(scope="module")
def sizing() -> enrich.ChunkSizing:
    conf = django_settings.FOUNDRY
    return enrich.ChunkSizing.for_model(conf.embedding.model, conf.ingest.chunk_tokens)


def test_every_seed_is_read(seeds: dict[str, bytes], sizing: enrich.ChunkSizing) -> None:
    """The control: unmutated, every seed is read (the image one needs tesseract), so a refusal means something."""
    for name, data in seeds.items():
        outcome = parser_fuzz.parse(name, data, count=sizing.count, max_tokens=sizing.max_chunk_tokens)
        if name.endswith(".png") and outcome.status == "refused" and "tesseract" in outcome.detail:
            continue
        assert outcome.status == "read", (name, outcome)


@pytest.mark.parametrize("kind", KINDS)
def test_mutated_files_are_read_or_refused_with_a_reason(
    kind: str, seeds: dict[str, bytes], sizing: enrich.ChunkSizing
) -> None:
    seen: dict[str, int] = {}

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
    )
    @given(data=parser_fuzz.files(kind, seeds[f"seed.{kind}"]))
    def check(data: bytes) -> None:
        outcome = parser_fuzz.parse(f"fuzz.{kind}", data, count=sizing.count, max_tokens=sizing.max_chunk_tokens)
        seen[outcome.status] = seen.get(outcome.status, 0) + 1
        assert not outcome.finding, outcome

    check()
    assert sum(seen.values()) >= EXAMPLES // 2, seen


def mutants(seeds: dict[str, bytes], per_kind: int) -> dict[str, bytes]:
    """``per_kind`` mutants of every seed, by file name: the same ones on every run."""
    out = {}
    for name, data in seeds.items():
        rng = random.Random(name)
        for i in range(per_kind):
            cut = bytearray(data)
            for _ in range(rng.randint(1, 4)):
                at = rng.randrange(len(cut))
                cut[at] ^= 1 << rng.randrange(8)
            if i % 2:
                cut = cut[: rng.randrange(1, len(cut))]
            out[f"m{i}-{name}"] = bytes(cut)
    return out


def test_ingest_records_each_bad_file_on_its_own_row_with_its_reason(
    kb: Path, seeds: dict[str, bytes], make_user: Callable[..., Any]
) -> None:
    files = mutants({n: d for n, d in seeds.items() if not n.endswith(".png")}, per_kind=3)
    for name, data in files.items():
        (kb / name).write_bytes(data)
    (kb / "good.md").write_bytes(seeds["seed.md"])
    report = {f.path: f for f in knowledge_base_ingest(target=kb).files}
    assert report["good.md"].status == "ingested"
    rows = {s.path: s for s in Source.objects.all()}
    for name in files:
        result = report[name]
        assert result.status in ("ingested", "failed"), (name, result)
        if result.status == "failed":
            assert rows[name].status == "failed" and rows[name].reason == result.reason, name
            assert result.reason.strip() and not result.reason.startswith("unexpected error"), (name, result.reason)
    assert any(r.status == "failed" for r in report.values())


def test_html_with_control_characters_is_read(sizing: enrich.ChunkSizing) -> None:
    """Found by the fuzzer: lxml's parser keeps a control character its text setter then refuses, so dropping the
    script beside it raised ValueError (an "unexpected error" in ingest)."""
    page = b"<html><body><h1>Pump \x10P-7</h1><p>6 bar<script></script>\x06 at 40 l/min</p></body></html>"
    outcome = parser_fuzz.parse("page.html", page, count=sizing.count, max_tokens=sizing.max_chunk_tokens)
    assert outcome.status == "read", outcome
