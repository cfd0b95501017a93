"""all-MiniLM-L6-v2: questions on onnxruntime, bulk on sentence-transformers (torch).

A question embedded from a cold process would otherwise wait seconds for torch and transformers to import;
onnxruntime and ``tokenizers`` load in a fraction of that. The ONNX graph is exported from the shipped weights
once per machine (``torch.onnx.export``, which needs torch, as ingest already does), checked against
sentence-transformers on probe texts, and kept in the model cache (``FOUNDRY_MODEL_CACHE``; default
``$XDG_CACHE_HOME/foundry``, else ``~/.cache/foundry``) under a name that changes with the weights. Calls of
more than ``ONNX_MAX_TEXTS`` texts (ingest) run on torch, which encodes large batches faster here
(docs/benchmarks.md, "Cold `foundry query`").
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import threading
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from core.llm.errors import ModelUnavailable

log = logging.getLogger(__name__)

MAX_TOKENS = 256  # the word pieces MiniLM reads (its sentence-transformers max_seq_length)
ONNX_MAX_TEXTS = 256  # larger calls are bulk work: torch
# The exported graph is kept only when its vectors match sentence-transformers' within this on the probes.
EXPORT_TOLERANCE = 1e-5
_PROBES = [
    "How many sensors can be connected to the bus?",
    "Wie viele Sensoren können angeschlossen werden?",
    "passage: " + "A long text of many words that fills more than one window of the model. " * 40,
    "x",
]
_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def model_cache() -> Path:
    """Where exported models are kept (``FOUNDRY_MODEL_CACHE``, else the user's cache folder)."""
    if configured := os.environ.get("FOUNDRY_MODEL_CACHE"):
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "foundry"


def _weights_key(path: Path) -> str:
    """A name for the weights in ``path``: their files' names, sizes and modification times."""
    digest = hashlib.sha256()
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        stat = file.stat()
        digest.update(f"{file.relative_to(path)}:{stat.st_size}:{stat.st_mtime_ns};".encode())
    return digest.hexdigest()[:16]


class MiniLMEmbedder:
    """all-MiniLM-L6-v2, mean-pooled and normalised, as sentence-transformers encodes it."""

    def __init__(self, path: Path) -> None:
        from tokenizers import Tokenizer

        self.path = path
        self.lock = threading.RLock()  # the export loads the torch model under it
        self.counter = Tokenizer.from_file(str(path / "tokenizer.json"))
        self.counter.no_truncation()
        self.counter.no_padding()
        self.tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
        self.tokenizer.enable_truncation(MAX_TOKENS)
        self.tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        self._torch: Any = None
        self._session: Any = None

    def encode(self, texts: list[str], batch_size: int = 64) -> np.ndarray:
        if len(texts) > ONNX_MAX_TEXTS:
            return self._torch_encode(texts, batch_size)
        session = self.session()
        parts = [self._onnx_encode(session, texts[i : i + batch_size]) for i in range(0, len(texts), batch_size)]
        return np.concatenate(parts) if parts else np.empty((0, 384), dtype=np.float32)

    def count_tokens(self, text: str) -> int:
        """Word pieces of ``text``, without the [CLS]/[SEP] markers."""
        return len(self.counter.encode(text, add_special_tokens=False).ids)

    def _onnx_encode(self, session: Any, texts: list[str]) -> np.ndarray:
        encoded = self.tokenizer.encode_batch(texts)
        feed = {
            "input_ids": np.array([e.ids for e in encoded], dtype=np.int64),
            "attention_mask": np.array([e.attention_mask for e in encoded], dtype=np.int64),
            "token_type_ids": np.array([e.type_ids for e in encoded], dtype=np.int64),
        }
        hidden = session.run(None, feed)[0]
        mask = feed["attention_mask"][:, :, None].astype(np.float32)
        pooled = (hidden * mask).sum(axis=1) / np.clip(mask.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)

    def _torch_encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        return self.sentence_transformer().encode(
            texts, batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
        )

    def sentence_transformer(self) -> Any:
        with self.lock:
            if self._torch is None:
                from sentence_transformers import SentenceTransformer

                self._torch = SentenceTransformer(str(self.path), device="cpu")
            return self._torch

    def session(self) -> Any:
        """The onnxruntime session, the graph exported first when the cache lacks it."""
        with self.lock:
            if self._session is None:
                self._session = self._load(self._exported())
            return self._session

    def _load(self, graph: Path) -> Any:
        import onnxruntime  # type: ignore[import-untyped]

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = os.cpu_count() or 1
        options.inter_op_num_threads = 1
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        return onnxruntime.InferenceSession(str(graph), options, providers=["CPUExecutionProvider"])

    def _exported(self) -> Path:
        cache = model_cache()
        graph = cache / f"all-minilm-l6-v2-{_weights_key(self.path)}.onnx"
        if graph.is_file():
            return graph
        try:
            cache.mkdir(parents=True, exist_ok=True)
            with open(cache / f"{graph.name}.lock", "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be exporting it
                if not graph.is_file():
                    self._export(graph)
        except OSError as exc:
            raise ModelUnavailable(
                f"cannot write the exported model to {cache} ({exc}); set FOUNDRY_MODEL_CACHE to a writable folder",
                model="local/all-minilm-l6-v2",
            ) from exc
        return graph

    def _export(self, graph: Path) -> None:
        """Export the weights' transformer to ``graph`` (via a partial file), kept only when it encodes the probes
        as sentence-transformers does."""
        import torch

        model = self.sentence_transformer()
        transformer = model[0].auto_model.eval()

        class Hidden(torch.nn.Module):
            def __init__(self, inner: torch.nn.Module) -> None:
                super().__init__()
                self.inner = inner

            def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
                return self.inner(
                    input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
                ).last_hidden_state

        sample = self.tokenizer.encode_batch(_PROBES[:2])
        args = tuple(
            torch.tensor([getattr(e, attr) for e in sample], dtype=torch.long)
            for attr in ("ids", "attention_mask", "type_ids")
        )
        partial = graph.with_name(f"{graph.name}.partial")
        axes = {name: {0: "batch", 1: "tokens"} for name in _INPUTS}
        with torch.no_grad(), warnings.catch_warnings():
            # The tracer's notes on shapes it takes as constants: the probes below check the graph on other shapes.
            warnings.simplefilter("ignore")
            torch.onnx.export(
                Hidden(transformer),
                args,
                str(partial),
                input_names=list(_INPUTS),
                output_names=["last_hidden_state"],
                dynamic_axes={**axes, "last_hidden_state": {0: "batch", 1: "tokens"}},
                opset_version=17,
                dynamo=False,
            )
        exported = self._onnx_encode(self._load(partial), _PROBES)
        expected = self._torch_encode(_PROBES, len(_PROBES))
        difference = float(np.abs(exported - expected).max())
        if difference > EXPORT_TOLERANCE:
            partial.unlink(missing_ok=True)
            raise ModelUnavailable(
                f"the ONNX export of all-MiniLM-L6-v2 differs from sentence-transformers by {difference:.2e} "
                f"(> {EXPORT_TOLERANCE:.0e})",
                model="local/all-minilm-l6-v2",
            )
        os.replace(partial, graph)
        log.info("exported all-MiniLM-L6-v2 to %s (max difference %.1e)", graph, difference)
