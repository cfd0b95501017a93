"""Fit the extractive reader's answerability model (generation/answerability.py) and its two thresholds.

    PYTHONPATH=. .venv/bin/python bench/fit_answerability.py [--squad FILE] [--limit 200] [--seed 0]
        [--features bench/results/answerability_features_MODEL.json] [--refit] [--write]

Questions: SQuAD 2.0 dev, none that ``foundry eval answers --kb-articles 5 --seed 0 --limit 300`` asks (so the
eval stays a test of the fit). Two knowledge bases: the eval's five articles, and the other five; for each, up
to ``--limit`` of its answerable questions, of its unanswerable ones (``is_impossible``: the passage is found,
the answer is not in it) and of the other articles' questions (out of corpus). Each question runs through the
product's own path (``retrieve`` with its gate, ``compose.reading_of``, ``answerability.features``); a question
the gate refuses, or that names a code the passages lack (``reader.unmentioned``), never reaches the model and
is left out. Label: 1 when the question is answerable and the reading's quotes hold a gold answer (normalised
as the official scorer does), else 0: the model answers when the quote is likely to be right.

The rows are split 70/30 at random (``--seed``) into a fitting part and a held-out part. A logistic regression
(scikit-learn, standardised features, L2, C chosen by 5-fold cross-validation on the fitting part) gives the
weights; ``reader_min_score`` is the probability maximising answered-and-right minus answered-and-unanswerable
(Youden's J) on the fitting part; ``reader_low_score`` the probability 90 % of the fitting part's right answers
reach (under it an answer is weaker than nearly every right one). Held-out figures use only the held-out part.
``--write`` stores the model and its thresholds in generation/data/answerability.json. ``--refit`` fits on rows
collected before (``--features``) without asking again. ``--multilingual FILE`` adds the readings of a
``bench/multilingual.py --split dev --answer-all`` run (never its blind split); the shipped model is fitted on SQuAD
alone, so the manuals stay a test of it.
"""

from __future__ import annotations

import argparse
import datetime
import json
import random
import sys
import time
from pathlib import Path

import _common  # noqa: F401  (Django set-up)
import numpy as np
from django.conf import settings

from foundry_site.evaluation.answers import sample, squad_index
from foundry_site.evaluation.squad import load_squad, normalize_answer
from generation import answerability, reader
from generation.answers.compose import reading_of
from retrieval.services.retrieve import retrieve

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
HELD_OUT = 0.3
RIGHT_KEPT = 0.9  # reader_low_score: this share of the fitting part's right answers stays above it


def holds(text: str, golds: list[str]) -> bool:
    said = f" {normalize_answer(text)} "
    return any(f" {g} " in said for g in map(normalize_answer, golds) if g)


def row(question, kind: str, kb: str) -> dict | None:
    found = retrieve(question=question.question, collection_ids=None)
    if not found.gate.passed or not found.candidates:
        return None
    _, passages, reading = reading_of(found)
    if reader.unmentioned(question.question, passages) or not reading.quotes:
        return None
    right = kind == "answerable" and holds(reading.text, list(question.answers))
    return {
        "qid": question.qid,
        "kind": kind,
        "kb": kb,
        "right": right,
        "features": answerability.features(found.question, passages, reading, found.gate.max_score),
    }


def collect(squad: Path, limit: int, seed: int) -> list[dict]:
    articles = load_squad(squad)
    eval_kb, asked = sample(articles, kb_articles=5, limit=300, seed=0)
    left_out = {q.qid for qs in asked.values() for q in qs}
    other_kb = [a for a in articles if a not in eval_kb]
    rng = random.Random(seed)
    rows: list[dict] = []
    for name, kb in (("eval-kb", eval_kb), ("other-kb", other_kb)):
        outside = [a for a in articles if a not in kb]
        pools = {
            "answerable": [q for a in kb for q in a.questions if not q.impossible and q.qid not in left_out],
            "impossible": [q for a in kb for q in a.questions if q.impossible and q.qid not in left_out],
            "out_of_corpus": [q for a in outside for q in a.questions if q.qid not in left_out],
        }
        with squad_index(squad, kb):
            for kind, pool in pools.items():
                chosen = rng.sample(pool, min(limit, len(pool)))
                got = [r for r in (row(q, kind, name) for q in chosen) if r]
                print(f"  {name} {kind}: {len(chosen)} asked, {len(got)} read", flush=True)
                rows += got
    return rows


def multilingual_rows(path: Path) -> list[dict]:
    """Rows of a ``bench/multilingual.py --split dev --answer-all`` result: its answerable questions and follow-ups
    (right when the answer holds an expected string) and its unanswerable ones, each as the product read it; those
    refused before the model (the gate, a name the passages lack) are left out."""
    rows = []
    for result in json.loads(path.read_text())["languages"]:
        for r in result["rows"]:
            if r["refusal"] or not r.get("features"):
                continue
            kind = "impossible" if r["kind"] == "unanswerable" else "answerable"
            rows.append(
                {
                    "qid": f"{result['language']}-{r['id']}",
                    "kind": kind,
                    "kb": f"multilingual-{result['language']}",
                    "right": bool(r.get("holds")),
                    "features": r["features"],
                }
            )
    return rows


def matrix(rows: list[dict]) -> tuple[np.ndarray, np.ndarray]:
    x = np.array([[r["features"][f] for f in answerability.FEATURES] for r in rows], dtype=float)
    return x, np.array([r["right"] for r in rows], dtype=int)


def rates(rows: list[dict], p: np.ndarray, refuse: float) -> dict:
    """Of each kind, the share answered (probability ≥ ``refuse``), and of the answerable the share answered right."""
    out: dict = {}
    for kind in ("answerable", "impossible", "out_of_corpus"):
        idx = [i for i, r in enumerate(rows) if r["kind"] == kind]
        if not idx:
            continue
        answered = [i for i in idx if p[i] >= refuse]
        out[kind] = {"read": len(idx), "answered": round(len(answered) / len(idx), 4)}
        if kind == "answerable":
            out[kind]["answered_right"] = round(sum(rows[i]["right"] for i in answered) / len(idx), 4)
    return out


def youden(rows: list[dict], p: np.ndarray) -> float:
    right = np.array([r["right"] for r in rows], dtype=bool)
    wrong_kind = np.array([r["kind"] != "answerable" for r in rows], dtype=bool)
    best, best_t = -1.0, 0.5
    for t in np.unique(np.round(p, 4)):
        j = (p[right] >= t).mean() - (p[wrong_kind] >= t).mean() if wrong_kind.any() else 0.0
        if j > best:
            best, best_t = j, float(t)
    return best_t


def low_from(rows: list[dict], p: np.ndarray, floor: float) -> float:
    """The probability ``RIGHT_KEPT`` of the right answers (probability ≥ ``floor``) reach: an answer under it is
    weaker than nearly every right one, and low confidence."""
    right = np.array([r["right"] for r in rows], dtype=bool) & (p >= floor)
    return max(floor, float(np.quantile(p[right], 1 - RIGHT_KEPT))) if right.any() else floor


def fit(rows: list[dict], seed: int) -> dict:
    from sklearn.linear_model import LogisticRegressionCV
    from sklearn.metrics import roc_auc_score

    rng = random.Random(seed)
    order = list(range(len(rows)))
    rng.shuffle(order)
    cut = int(len(order) * (1 - HELD_OUT))
    fitting, held = [rows[i] for i in order[:cut]], [rows[i] for i in order[cut:]]
    x, y = matrix(fitting)
    mean, scale = x.mean(axis=0), x.std(axis=0)
    scale[scale == 0] = 1.0
    clf = LogisticRegressionCV(Cs=10, cv=5, scoring="roc_auc", max_iter=2000, l1_ratios=(0.0,))
    clf.fit((x - mean) / scale, y)
    model = answerability.Model(tuple(mean), tuple(scale), tuple(clf.coef_[0]), float(clf.intercept_[0]), 0.0, 1.0)

    def probabilities(part: list[dict]) -> np.ndarray:
        return np.array([model.probability(r["features"]) for r in part])

    p_fit, p_held = probabilities(fitting), probabilities(held)
    refuse = youden(fitting, p_fit)
    low = round(low_from(fitting, p_fit, refuse), 4)
    xh, yh = matrix(held)
    return {
        "model": model,
        "refuse": round(refuse, 4),
        "low": round(low, 4),
        "fitting": {"rows": len(fitting), "auc": round(roc_auc_score(y, p_fit), 4), **rates(fitting, p_fit, refuse)},
        "held_out": {
            "rows": len(held),
            "auc": round(roc_auc_score(yh, p_held), 4),
            **rates(held, p_held, refuse),
            "by_source": {
                kb: rates([r for r in held if r["kb"] == kb], p_held[[r["kb"] == kb for r in held]], refuse)
                for kb in sorted({r["kb"] for r in held})
            },
        },
        "C": float(clf.C_[0]),
    }


def write(result: dict, embedding_model: str, command: str, features_file: Path, data_files: list[Path]) -> None:
    model = result["model"]
    data = json.loads(answerability.DATA.read_text()) if answerability.DATA.exists() else {"models": {}}
    data["about"] = (
        "The extractive reader's answerability models, one per embedding.model (generation/answerability.py): "
        "a logistic regression over standardised features, written by bench/fit_answerability.py."
    )
    data["models"][embedding_model] = {
        "features": list(answerability.FEATURES),
        "mean": [round(v, 6) for v in model.mean],
        "scale": [round(v, 6) for v in model.scale],
        "weights": [round(v, 6) for v in model.weights],
        "intercept": round(model.intercept, 6),
        "refuse_below": result["refuse"],
        "low_below": result["low"],
        "fitted": {
            "command": command,
            "data": f"SQuAD 2.0 dev ({features_file.relative_to(ROOT)}): questions foundry eval answers does not ask"
            + "".join(f"; {p.relative_to(ROOT)}" for p in data_files),
            "date": datetime.date.today().isoformat(),
            "machine": _common.machine_line(),
            "C": result["C"],
            "fitting": result["fitting"],
            "held_out": result["held_out"],
        },
    }
    answerability.DATA.parent.mkdir(exist_ok=True)
    answerability.DATA.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--squad", type=Path, default=_common.DEFAULT_DATA.parent / "squad2" / "dev.json")
    parser.add_argument("--limit", type=int, default=200, help="questions per kind and knowledge base at most")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--features", type=Path, default=None, help="rows collected (written, or read by --refit)")
    parser.add_argument(
        "--multilingual", type=Path, action="append", default=[], help="bench/multilingual.py --answer-all results"
    )
    parser.add_argument("--refit", action="store_true", help="fit on --features without asking again")
    parser.add_argument("--write", action="store_true", help="store the model and its thresholds")
    args = parser.parse_args()
    embedding_model = settings.FOUNDRY.embedding.model
    features_file = args.features or RESULTS / f"answerability_features_{embedding_model.replace('/', '_')}.json"
    start = time.perf_counter()
    if args.refit:
        rows = json.loads(features_file.read_text())["rows"]
    else:
        rows = collect(args.squad, args.limit, args.seed)
        features_file.write_text(
            json.dumps({"embedding_model": embedding_model, "machine": _common.machine_line(), "rows": rows}) + "\n"
        )
    for path in args.multilingual:
        rows += multilingual_rows(path)
    result = fit(rows, args.seed)
    print(f"machine: {_common.machine_line()}; {time.perf_counter() - start:.0f} s; C {result['C']:.4g}")
    print("features:", ", ".join(f"{f} {w:+.3f}" for f, w in zip(answerability.FEATURES, result["model"].weights)))
    print(f"reader_min_score {result['refuse']}, reader_low_score {result['low']}")
    print("fitting: ", json.dumps(result["fitting"]))
    print("held out:", json.dumps(result["held_out"]))
    if args.write:
        command = "bench/fit_answerability.py " + " ".join(sys.argv[1:])
        write(result, embedding_model, command.strip(), features_file, [p.resolve() for p in args.multilingual])
        print(f"written: {answerability.DATA.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
