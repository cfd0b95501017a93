"""A third retrieval channel beside BM25 and MiniLM, measured on SciFact (train claims, dev data
only): does it add quality that survives choosing its weight on other claims?

    /work/main/.venv/bin/python bench/third_channel.py [--data DIR] [--top-k 100]
        [--channels near1,near3,static] [--splits 500] [--json out.json]

Candidate channels:

- ``nearN``, term proximity: one FTS5 query on ``chunks_fts``,
  ``NEAR("a" "b", N) OR NEAR("b" "c", N) OR ...`` over consecutive topical words of the claim
  (stop words dropped, as the BM25 channel drops them), ranked by ``bm25()``.
- ``static``: WordLlama (``wordllama``, requirements/bench.txt), the one other embedding model
  found whose PyPI package ships its weights: static 256-d token embeddings, mean-pooled, over
  each chunk's embedded text (context + text), ranked by cosine.
- ``documents``: the shipped embedding model over each whole document (title + text), a document's
  hit standing for its first chunk (the product embeds chunks and sentence windows, not documents).

Every train claim is searched once through the product's own ``retrieve()`` in hybrid mode
(``--top-k`` 100 by default, as ``foundry eval``: channel depth 500; each candidate channel is
cut at the same depth). The channels are fused with the product's ``reciprocal_rank_fusion`` for
every RRF k in K and third-channel weight in WEIGHTS (weight 0 is the shipped pipeline).
Then, ``--splits`` times, the claims are halved at random: on one half the best (channel, k,
weight) is picked and, beside it, the best k with no third channel; both are scored on the
other half, beside the shipped default (``heldout.per_claim`` and ``heldout.halving``). The
difference is what the channel is worth on claims its weight was not chosen on.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
from pathlib import Path

import _common  # Django set-up
import numpy as np
from django.conf import settings
from django.db import connection
from heldout import bootstrap, halving, per_claim

from core import llm
from core import language
from retrieval.fusion import Hit, reciprocal_rank_fusion
from sources.models import Chunk
from sources.services.prepare import with_context

K = (60, 30, 10, 5)
WEIGHTS = (0.0, 0.1, 0.2, 0.3, 0.5, 1.0)
WORD = re.compile(r"\w+", re.UNICODE)


def proximity_query(text: str, near: int) -> str:
    """``NEAR("a" "b", near) OR ...`` over consecutive topical words of ``text``; "" when fewer than two."""
    words = [w for w in WORD.findall(text.lower()) if w not in language.analyzer("en").stop_words]
    return " OR ".join(f"NEAR({_quoted(a)} {_quoted(b)}, {near})" for a, b in dict.fromkeys(zip(words, words[1:])))


def _quoted(word: str) -> str:
    return '"' + word.replace('"', '""') + '"'


class Proximity:
    def __init__(self, near: int):
        self.near = near

    def __call__(self, text: str, depth: int) -> list[Hit]:
        query = proximity_query(text, self.near)
        if not query:
            return []
        with connection.cursor() as cur:
            cur.execute(
                "SELECT rowid, bm25(chunks_fts) FROM chunks_fts WHERE chunks_fts MATCH %s ORDER BY 2 LIMIT %s",
                [query, depth],
            )
            return [Hit(cid, -score) for cid, score in cur.fetchall()]


class Static:
    """WordLlama over every chunk (its package looks for its tokenizer in the wrong folder unless
    ``cache_dir`` is the package's own, and would download it; downloads are disabled)."""

    def __init__(self):
        import wordllama
        from wordllama import WordLlama

        self.model = WordLlama.load(cache_dir=Path(wordllama.__file__).parent, disable_download=True)
        rows = list(Chunk.objects.order_by("pk").values_list("pk", "context", "text"))
        self.ids = np.array([pk for pk, _, _ in rows])
        self.matrix = self.model.embed([with_context(c, t) for _, c, t in rows], norm=True)

    def __call__(self, text: str, depth: int) -> list[Hit]:
        scores = self.matrix @ self.model.embed([text], norm=True)[0]
        top = np.argsort(-scores)[:depth]
        return [Hit(int(self.ids[i]), float(scores[i])) for i in top]


class Documents:
    """The shipped embedding model over whole documents (title + text, cut at its input limit), each
    document's hit standing for its first chunk: what a per-document vector would add to the
    chunk and window vectors."""

    def __init__(self, beir: _common.Beir):
        self.matrix = _common.document_vectors(beir)
        first: dict[str, int] = {}
        for chunk_id, doc in sorted(beir.index.doc_of_chunk.items()):
            first.setdefault(doc, chunk_id)
        self.chunk_of_row = [first.get(doc) for doc in beir.corpus]
        self.model = settings.FOUNDRY.embedding.model

    def __call__(self, text: str, depth: int) -> list[Hit]:
        scores = self.matrix @ np.asarray(llm.embed([text], model=self.model)[0], dtype=np.float32)
        top = [i for i in np.argsort(-scores, kind="stable") if self.chunk_of_row[i] is not None][:depth]
        return [Hit(self.chunk_of_row[i], float(scores[i])) for i in top]


def channel(name: str, beir: _common.Beir):
    if name == "static":
        return Static()
    if name == "documents":
        return Documents(beir)
    if name.startswith("near") and name[4:].isdigit():
        return Proximity(int(name[4:]))
    raise SystemExit(f"--channels: unknown channel {name!r} (nearN, static or documents)")


def two_channels(setting: str) -> bool:
    """A setting with no third channel: the shipped pipeline at some RRF k."""
    return setting.endswith(" w=0")


def grid(thirds: list[str]) -> dict:
    """Every setting by name: the two shipped channels at each k (``k=… w=0``), and with each third
    channel at each weight; and each third channel alone (``… alone``, not a setting)."""
    out = {}
    for third in thirds:
        for k in K:
            for weight in WEIGHTS:
                if weight == 0 and third == thirds[0]:
                    out[f"k={k} w=0"] = lambda ch, k=k: reciprocal_rank_fusion(
                        {"bm25": ch["bm25"], "dense": ch["dense"]}, k=k
                    )
                elif weight:
                    out[f"k={k} {third} w={weight}"] = lambda ch, k=k, t=third, w=weight: reciprocal_rank_fusion(
                        {"bm25": ch["bm25"], "dense": ch["dense"], t: ch[t]}, k=k, weights={t: w}
                    )
    for third in thirds:
        out[f"{third} alone"] = lambda ch, third=third: ch[third]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=_common.DEFAULT_DATA)
    parser.add_argument("--top-k", type=int, default=100)
    parser.add_argument("--channels", default="near1,near3,static", help="comma-separated: nearN, static, documents")
    parser.add_argument("--splits", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    default = f"k={settings.FOUNDRY.retrieval.rrf_k} w=0"
    with _common.scifact(args.data) as beir:
        thirds = {name: channel(name, beir) for name in args.channels.split(",")}
        _, scores, times = per_claim(beir, args.top_k, grid(list(thirds)), extra=thirds)
    alone = {name: scores.pop(f"{name} alone") for name in thirds}
    rng = np.random.default_rng(args.seed)
    table = bootstrap(scores, default, 2000, rng)
    results = {
        "machine": _common.machine_line(),
        "top_k": args.top_k,
        "claims": len(scores[default]),
        "default": default,
        "channel_alone": {name: round(float(v.mean()), 4) for name, v in alone.items()},
        "without_channel": {name: v for name, v in table.items() if two_channels(name)},
        "best_settings": dict(sorted(table.items(), key=lambda item: -item[1]["ndcg@10"])[:12]),
        "at_default_k": {name: v for name, v in table.items() if name.startswith(default.split()[0] + " ")},
        "channel_ms": {
            name: {"p50": round(statistics.median(t), 1), "p95": round(float(np.percentile(t, 95)), 1)}
            for name, t in times.items()
        },
        "halving": halving(scores, default, args.splits, rng, baseline=two_channels),
    }
    print(json.dumps(results, indent=2))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
