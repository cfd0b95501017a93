"""Thresholds carried from one embedding model's similarity scale to another's by quantile matching,
for the thresholds that have no calibration run of their own.

    /work/main/.venv/bin/python bench/threshold_transfer.py FROM.json TO.json \
        --value generation.low_confidence_score=0.45 --value generation.min_support=0.6 ...

FROM.json and TO.json are ``bench/gate_calibration.py --json`` outputs of the two models on the same
SQuAD file, articles and seed: each question's best candidate cosine, per kind (answerable,
unanswerable in corpus, out of corpus), or, in older outputs, only that score's percentiles per kind
(``best_score_percentiles``: P5 … P95, read as a piecewise-linear distribution). The kinds weigh alike.
A value ``t`` of the first model becomes the second model's score at the same quantile, so "the share
of questions whose best passage scores under t" is kept. This carries the scale,
not the task: a threshold calibrated on its own task (the gate, the reader) is better and wins.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np


SAMPLES = 1000  # points drawn per kind from a percentile summary


def pooled(path: Path) -> np.ndarray:
    """Best scores, the same number per kind."""
    data = json.loads(path.read_text())
    if "scores" in data:
        kinds = [np.asarray([q[0] for q in lists if q], dtype=float) for lists in data["scores"].values()]
        size = min(len(k) for k in kinds)
        return np.concatenate([np.quantile(k, np.linspace(0, 1, size)) for k in kinds])
    grid = np.linspace(0.05, 0.95, SAMPLES)
    out = []
    for points in data["best_score_percentiles"].values():
        levels = sorted((int(k[1:]) / 100, v) for k, v in points.items())
        out.append(np.interp(grid, [p for p, _ in levels], [v for _, v in levels]))
    return np.concatenate(out)


def carried(value: float, source: np.ndarray, target: np.ndarray) -> float:
    share = float(np.mean(source < value))
    return round(float(np.quantile(target, share)), 3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", type=Path)
    parser.add_argument("target", type=Path)
    parser.add_argument("--value", action="append", default=[], help="key=threshold of the source model")
    args = parser.parse_args()
    source, target = pooled(args.source), pooled(args.target)
    out = {}
    for item in args.value:
        key, _, text = item.partition("=")
        value = float(text)
        out[key] = {"from": value, "share_below": round(float(np.mean(source < value)), 4)}
        out[key]["to"] = carried(value, source, target)
    print(json.dumps({"pairs": [int(source.size), int(target.size)], "carried": out}, indent=1))


if __name__ == "__main__":
    main()
