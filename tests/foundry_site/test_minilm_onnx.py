"""all-MiniLM-L6-v2 on onnxruntime: the same vectors as sentence-transformers, exported once into the model cache,
and a question embedded in a new process without importing torch (the real model)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from django.conf import settings

from core.llm import minilm
from core.llm.errors import ModelUnavailable
from core.llm.local import _minilm_path

TEXTS = [
    "How many sensors can be connected to the RS-485 bus?",
    "Die maximale Buslänge beträgt 1000 m bei 9600 Baud.",
    "word " * 600,  # past the 256 word pieces MiniLM reads
    "",
]


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[minilm.MiniLMEmbedder, Path]:
    cache = tmp_path_factory.mktemp("model-cache")
    os.environ["FOUNDRY_MODEL_CACHE"] = str(cache)
    try:
        embedder = minilm.MiniLMEmbedder(_minilm_path())
        embedder.session()
    finally:
        del os.environ["FOUNDRY_MODEL_CACHE"]
    return embedder, cache


def test_onnx_vectors_match_sentence_transformers(exported: tuple[minilm.MiniLMEmbedder, Path]) -> None:
    embedder, cache = exported
    assert [p.suffix for p in cache.iterdir() if not p.name.endswith(".lock")] == [".onnx"]  # no partial left
    onnx = embedder.encode(TEXTS, batch_size=2)
    torch = embedder._torch_encode(TEXTS, batch_size=2)
    assert onnx.shape == torch.shape == (len(TEXTS), 384)
    assert np.abs(onnx - torch).max() <= minilm.EXPORT_TOLERANCE
    assert np.allclose(np.linalg.norm(onnx, axis=1), 1.0, atol=1e-5)


def test_tokens_are_counted_untruncated(exported: tuple[minilm.MiniLMEmbedder, Path]) -> None:
    embedder, _ = exported
    assert embedder.count_tokens("word " * 600) == 600
    assert embedder.count_tokens("") == 0


def test_a_bulk_call_runs_on_torch(exported: tuple[minilm.MiniLMEmbedder, Path], monkeypatch) -> None:
    embedder, _ = exported
    monkeypatch.setattr(minilm, "ONNX_MAX_TEXTS", 1)
    monkeypatch.setattr(embedder, "session", lambda: pytest.fail("a bulk call went to onnxruntime"))
    assert embedder.encode(TEXTS[:2]).shape == (2, 384)


def test_an_unwritable_cache_names_the_variable(tmp_path: Path, monkeypatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("FOUNDRY_MODEL_CACHE", str(blocker / "cache"))
    with pytest.raises(ModelUnavailable, match="FOUNDRY_MODEL_CACHE"):
        minilm.MiniLMEmbedder(_minilm_path()).session()


def test_the_cache_defaults_to_the_users_cache_folder(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.delenv("FOUNDRY_MODEL_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert minilm.model_cache() == tmp_path / "foundry"


CODE = """
import json, sys
import django
django.setup()
import foundry_site.management.commands.foundry
from core import llm
vectors = llm.embed(sys.argv[1:], model="local/all-minilm-l6-v2", kind="query")
print(json.dumps({"vectors": vectors, "torch": "torch" in sys.modules}))
"""


def test_a_question_from_a_cold_process_needs_no_torch(exported: tuple[minilm.MiniLMEmbedder, Path], tmp_path) -> None:
    embedder, cache = exported
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "foundry_site.settings",
        "FOUNDRY_HOME": str(tmp_path),
        "FOUNDRY_MODEL_CACHE": str(cache),
        "PYTHONPATH": str(settings.BASE_DIR),
    }
    done = subprocess.run(
        [sys.executable, "-c", CODE, *TEXTS[:2]],
        env=env,
        cwd=settings.BASE_DIR,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["torch"] is False
    expected = embedder._torch_encode(TEXTS[:2], batch_size=2)
    assert np.abs(np.array(found["vectors"]) - expected).max() <= minilm.EXPORT_TOLERANCE
