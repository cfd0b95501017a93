"""BM25's k1 and b on SciFact (train claims, dev data only): would tuning them beat FTS5's
``bm25()``, whose k1 = 1.2 and b = 0.75 are fixed in SQLite's C code?

    /work/main/.venv/bin/pip install -r requirements/bench.txt -c requirements/lock.txt
    /work/main/.venv/bin/python bench/bm25_params.py [--data DIR] [--json out.json]

FTS5 offers no way to change them, so the sweep uses ``bm25s`` (Lucene's BM25, Snowball
stemmer, English stop words) over whole abstracts (title + text). Its (1.2, 0.75) row is the
baseline: the spread of the grid around it is what replacing ``bm25()`` could gain. Needs no
index and no model; runs in about a minute.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import _common
import bm25s
import Stemmer

from foundry_site.evaluation import metrics

K1 = (0.6, 0.9, 1.2, 1.5, 2.0)
B = (0.3, 0.4, 0.6, 0.75, 0.9)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=_common.DEFAULT_DATA)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    corpus, queries, qrels = _common.scifact_files(args.data)
    doc_ids = list(corpus)
    stemmer = Stemmer.Stemmer("english")
    docs = bm25s.tokenize(
        [f"{d.title} {d.text}" for d in corpus.values()], stopwords="en", stemmer=stemmer, show_progress=False
    )
    asked = bm25s.tokenize(
        list(queries.values()), stopwords="en", stemmer=stemmer, show_progress=False, return_ids=False
    )
    results = {}
    for k1 in K1:
        for b in B:
            ranker = bm25s.BM25(k1=k1, b=b, method="lucene")
            ranker.index(docs, show_progress=False)
            found, _ = ranker.retrieve(asked, k=10, show_progress=False, n_threads=1)
            scores = [metrics.ndcg_at_k([doc_ids[i] for i in row], qrels[q], 10) for q, row in zip(queries, found)]
            results[f"k1={k1} b={b}"] = round(metrics.mean(scores), 4)
            print(f"k1={k1} b={b}: {results[f'k1={k1} b={b}']}", flush=True)
    results["machine"] = _common.machine_line()
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
