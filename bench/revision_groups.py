"""Time the recency step's grouping of revisions (``retrieval.fusion.revisions``) on as many fused hits as a
hybrid query at ``top_k`` 100 gives (~900), against comparing every pair, and check both find the same pairs.

    .venv/bin/python bench/revision_groups.py [--hits 100 900 2000] [--runs 5]
        [--json bench/results/revision_groups_DATE.json]

Texts: SciFact abstracts (title and the first 120 words, about one chunk each), drawn at random (seed 0); every
50th is copied with one word added, as a revision. Overlap: ``retrieval/data/recency.json``'s fitted value.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from retrieval.fusion import ChunkFacts, Hit, revisions, similar_pairs, word_set  # noqa: E402

DATA = Path("/work/shared/eval/scifact/corpus.jsonl")


def every_pair(sets: dict[int, frozenset[str]], threshold: float) -> set[frozenset[int]]:
    """The pairs comparing every two sets finds (what ``revisions`` did before prefix filtering)."""
    keys = [k for k in sets if sets[k]]
    return {
        frozenset((a, b))
        for i, a in enumerate(keys)
        for b in keys[i + 1 :]
        if len(sets[a] & sets[b]) >= threshold * len(sets[a] | sets[b])
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=DATA)
    parser.add_argument("--hits", type=int, nargs="+", default=[100, 900, 2000])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    overlap = float(json.loads((ROOT / "retrieval" / "data" / "recency.json").read_text())["overlap"])
    docs = [json.loads(line) for line in args.corpus.open(encoding="utf-8")]
    rows = []
    for n in args.hits:
        sample = random.Random(0).sample(docs, n)
        texts = [" ".join(f"{d['title']} {d['text']}".split()[:120]) for d in sample]
        for i in range(0, n - 1, 50):
            texts[i + 1] = f"{texts[i]} revised"
        sets = {i: word_set(t) for i, t in enumerate(texts)}
        hits = [Hit(i, 1.0 / (i + 1)) for i in range(n)]
        facts = ChunkFacts({}, {i: i for i in range(n)}, sets)
        grouped = []
        for _ in range(args.runs):
            start = time.perf_counter()
            groups = revisions(hits, facts, overlap=overlap)
            grouped.append((time.perf_counter() - start) * 1000)
        start = time.perf_counter()
        reference = every_pair(sets, overlap)
        every_ms = (time.perf_counter() - start) * 1000
        same = {frozenset(p) for p in similar_pairs(sets, overlap)} == reference
        rows.append(
            {
                "hits": n,
                "revisions_ms_median": round(statistics.median(grouped), 1),
                "every_pair_ms": round(every_ms, 1),
                "groups": len(groups),
                "same_pairs": same,
            }
        )
        print(rows[-1], flush=True)
    if args.json:
        result = {
            "date": datetime.date.today().isoformat(),
            "machine": f"{platform.platform()}, {platform.processor() or platform.machine()}",
            "overlap": overlap,
            "rows": rows,
        }
        args.json.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
