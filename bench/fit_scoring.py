"""Fit the extractive reader's scoring weights (generation/reader/weights.py) on questions whose answer is known.

    PYTHONPATH=. .venv/bin/python bench/fit_scoring.py [--squad FILE] [--limit 150] [--seed 0]
        [--followups bench/followups.py --units --json result] [--multilingual bench/multilingual.py --units result]
        [--units bench/results/scoring_units_MODEL.json] [--refit] [--write]

A unit's score is its cosine plus weighted terms (``weights.Parts.score``); the reader quotes the unit that scores
best. Each question brings every unit its reading scored, with what was measured of it (``Parts``), and whether the
unit holds the question's answer: SQuAD 2.0 dev answerable questions that ``foundry eval answers --kb-articles 5
--seed 0 --limit 300`` does not ask (asked here through the product's ``retrieve`` and ``compose.reading_of``, on the
eval's five articles and on the other five; a gold answer, normalised as the official scorer does), the follow-ups
of a ``bench/followups.py --units`` run (the product's reading of the last turn; its expected fragment) and the dev
split of ``bench/multilingual.py --units`` (answerable questions and follow-ups; an expected string, as that
benchmark reads it). Questions none of whose units holds the answer cannot tell weights apart and are left out.

Each source's questions are split 70/30 at random (``--seed``) into a fitting part and a held-out part. Every weight
combination of the grid (``GRID``) is tried; the one whose best unit holds the answer for the largest share of the
fitting part's questions, averaged over SQuAD, the follow-ups and the manuals (their three languages together) so
that none outweighs the others by its size, is kept (ties: the smaller weights). Held-out figures use only the held-out
part. ``--write`` stores the weights with their figures in generation/data/scoring.json, for the configured
embedding.model. ``--refit`` fits on units collected before (``--units``) without asking again. After new weights the
answerability model reads other scores: refit it (bench/fit_answerability.py).
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import json
import random
import sys
import time
from dataclasses import fields
from pathlib import Path

import _common  # noqa: F401  (Django set-up)
import numpy as np
from scipy.optimize import minimize
from django.conf import settings

import _units
from foundry_site.evaluation.answers import sample, squad_index
from foundry_site.evaluation.squad import load_squad, normalize_answer
from generation.answers.compose import reading_of
from generation.reader import weights
from multilingual import holds as manual_holds
from retrieval.services.retrieve import retrieve

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
HELD_OUT = 0.3
CONTINUES = (0.0, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5)  # the follow-up discount, the one weight inside a max: tried each
RIDGES = (0.0, 1e-4, 1e-3, 1e-2)  # L2 penalties tried on the weights beside the cosine's (question weights sum to 1)
FOLDS = 5


def squad_questions(squad: Path, limit: int, seed: int) -> list[dict]:
    articles = load_squad(squad)
    eval_kb, asked = sample(articles, kb_articles=5, limit=300, seed=0)
    left_out = {q.qid for qs in asked.values() for q in qs}
    rng = random.Random(seed)
    out: list[dict] = []
    for name, kb in (("eval-kb", eval_kb), ("other-kb", [a for a in articles if a not in eval_kb])):
        pool = [q for a in kb for q in a.questions if not q.impossible and q.qid not in left_out]
        chosen = rng.sample(pool, min(limit, len(pool)))
        with squad_index(squad, kb):
            for q in chosen:
                found = retrieve(question=q.question, collection_ids=None)
                if not found.gate.passed or not found.candidates:
                    continue
                golds = [g for g in map(normalize_answer, q.answers) if g]
                units = _units.rows(reading_of(found)[2].scored)
                for u in units:
                    said = f" {normalize_answer(u['text'])} "
                    u["right"] = any(f" {g} " in said for g in golds)
                out.append({"source": "squad", "id": q.qid, "units": units})
        print(f"  squad {name}: {len(chosen)} asked, {sum(r['id'] in {c.qid for c in chosen} for r in out)} read")
    return out


def followup_questions(path: Path) -> list[dict]:
    out = []
    for measured in json.loads(path.read_text())["sets"]:
        for r in measured["rows"]:
            if r.get("fragment") and r.get("units"):
                for u in r["units"]:
                    u["right"] = r["fragment"].casefold() in u["text"].casefold()
                out.append({"source": "followups", "id": f"{measured['data']}:{r['id']}", "units": r["units"]})
    return out


def manual_questions(path: Path) -> list[dict]:
    result = json.loads(path.read_text())
    if result["split"] != "dev":
        raise SystemExit(f"{path}: the scoring is fitted on the dev split only, not {result['split']!r}")
    out = []
    for language in result["languages"]:
        for r in language["rows"]:
            if r["kind"] != "unanswerable" and r.get("units"):
                for u in r["units"]:
                    u["right"] = manual_holds(u["text"], r["expected"]) is not None
                out.append({"source": f"manuals-{language['language']}", "id": r["id"], "units": r["units"]})
    return out


COLUMNS = (*(f.name for f in fields(weights.Parts)), "right")  # a unit as the fit keeps it


def compact(units: list[dict]) -> list[list]:
    """A question's units as the fit needs them, in the reader's order among equal scores (passage rank, then
    position): what was measured of each (``COLUMNS``: ``Parts`` and whether it holds the answer)."""
    ordered = sorted(units, key=lambda u: (u["rank"], u["start"]))
    return [
        [round(v, 5) if isinstance(v, float) else int(v) if isinstance(v, bool) else v for v in row]
        for row in ([*u["parts"].values(), u["right"]] for u in ordered)
    ]


class Units:
    """The units of many questions as arrays, scored for many weight combinations at once."""

    def __init__(self, questions: list[dict]):
        rows = [(qi, u) for qi, q in enumerate(questions) for u in q["units"]]
        self.question = np.array([qi for qi, _ in rows])
        self.starts = np.flatnonzero(np.r_[True, self.question[1:] != self.question[:-1]])
        table = np.array([[np.nan if v is None else float(v) for v in u] for _, u in rows])
        named = dict(zip(COLUMNS, table.T))
        self.right = named["right"].astype(bool)
        self.asked, self.after, self.carried = named["asked"], named["after"], named["carried"]
        self.held, self.under, self.own = named["held"], named["under"], named["own"]
        self.follow, self.defines, self.instructs = named["follow"], named["defines"], named["instructs"]
        # equal scores: the reader's order, the first unit of each question winning
        self.order = np.arange(len(rows)) - np.repeat(self.starts, np.diff(np.r_[self.starts, len(rows)]))

    def terms(self, continues: float) -> np.ndarray:
        """Per unit, the terms its score weighs (``Parts.score``): cosine, the share of the question's words it holds
        (a carried-over word among them), the share only its heading path or title holds, and its three marks."""
        cosine = np.where(np.isnan(self.after), self.asked, np.maximum(self.asked, self.after - continues))
        words = np.where(np.isnan(self.carried), self.own, self.own + 1)  # a carried-over word counts as one more
        share = lambda count: np.divide(count, words, out=np.zeros_like(count), where=words > 0)  # noqa: E731
        held = share(self.held + np.nan_to_num(self.carried))
        return np.stack([cosine, held, share(self.under), self.follow, self.defines, self.instructs], axis=1)

    def loss(self, beta: np.ndarray, x: np.ndarray, weight: np.ndarray, ridge: float) -> tuple[float, np.ndarray]:
        """The weighted negative log-likelihood that a question's best unit is one holding its answer, each
        question's units a softmax of ``x @ beta`` (a conditional logit), and its gradient."""
        u = x @ beta
        sizes = np.diff(np.r_[self.starts, len(u)])
        e = np.exp(u - np.repeat(np.maximum.reduceat(u, self.starts), sizes))
        every, right = np.add.reduceat(e, self.starts), np.add.reduceat(e * self.right, self.starts)
        nll = float(np.sum(weight * (np.log(every) - np.log(right))))
        p_every, p_right = e / np.repeat(every, sizes), e * self.right / np.repeat(right, sizes)
        grad = ((p_every - p_right) * np.repeat(weight, sizes)) @ x
        penalty = ridge * np.r_[0.0, beta[1:]]
        return nll + float(penalty @ beta) / 2, grad + penalty

    def right_share(self, w: weights.Weights) -> np.ndarray:
        """Per question, whether its best-scoring unit holds the answer."""
        coefficients = np.array([1.0, w.lexical, w.lexical * w.under, w.follow, w.defines, w.instructs])
        score = self.terms(w.continues) @ coefficients - 1e-9 * self.order
        best = np.maximum.reduceat(score, self.starts)
        at_best = score == np.repeat(best, np.diff(np.r_[self.starts, len(score)]))
        return np.logical_or.reduceat(at_best & self.right, self.starts)


def split(questions: list[dict], seed: int) -> tuple[list[dict], list[dict]]:
    fitting, held = [], []
    for source in sorted({q["source"] for q in questions}):
        mine = [q for q in questions if q["source"] == source]
        random.Random(f"{seed}-{source}").shuffle(mine)
        cut = round(len(mine) * (1 - HELD_OUT))
        fitting += mine[:cut]
        held += mine[cut:]
    return fitting, held


def kind(question: dict) -> str:
    """What the fit weighs alike: SQuAD, the follow-ups, the manuals (of every language together)."""
    return question["source"].split("-")[0]


def figures(questions: list[dict], units: Units, w: weights.Weights) -> dict:
    right = units.right_share(w)

    def shares(key) -> dict[str, list[bool]]:
        return {
            s: [bool(right[i]) for i, q in enumerate(questions) if key(q) == s]
            for s in sorted({key(q) for q in questions})
        }

    return {
        "questions": len(questions),
        "mean_share": round(float(np.mean([np.mean(v) for v in shares(kind).values()])), 4),
        "by_source": {s: f"{sum(v)}/{len(v)}" for s, v in shares(lambda q: q["source"]).items()},
    }


def weighing(questions: list[dict]) -> np.ndarray:
    """Each question's weight in the likelihood: each kind (``kind``) weighs alike, the weights summing to 1."""
    kinds = [kind(q) for q in questions]
    return np.array([1 / kinds.count(k) for k in kinds]) / len(set(kinds))


def logit(questions: list[dict], continues: float, ridge: float, test: list[dict] | None = None) -> tuple[float, list]:
    """The conditional logit fitted on ``questions`` (``Units.loss``) with the follow-up discount ``continues``
    and the penalty ``ridge``: its coefficients, and its loss, unpenalised, on ``test`` (else on ``questions``)."""
    units = Units(questions)
    x = units.terms(continues)
    got = minimize(
        units.loss,
        np.r_[1.0, np.zeros(x.shape[1] - 1)],
        args=(x, weighing(questions), ridge),
        jac=True,
        method="L-BFGS-B",
        bounds=[(1e-3, None)] + [(0.0, None)] * (x.shape[1] - 1),
    )
    on = Units(test) if test is not None else units
    return on.loss(got.x, on.terms(continues), weighing(test or questions), 0.0)[0], got.x


def fit(questions: list[dict], seed: int) -> dict:
    readable = [q for q in questions if any(u[-1] for u in q["units"])]
    fitting, held = split(readable, seed)
    on_fitting, on_held = Units(fitting), Units(held)
    folds = [fitting[k::FOLDS] for k in range(FOLDS)]  # ``split`` shuffled each source: every fold holds each
    tried = {}
    for continues, ridge in itertools.product(CONTINUES, RIDGES):
        tried[continues, ridge] = sum(
            logit([q for j, f in enumerate(folds) if j != k for q in f], continues, ridge, test=fold)[0]
            for k, fold in enumerate(folds)
        )
    continues, ridge = min(tried, key=tried.get)
    beta = logit(fitting, continues, ridge)[1]
    cos, held_share, under_share, follow, defines, instructs = beta / beta[0]
    best_w = weights.Weights(
        lexical=round(held_share, 4),
        under=round(under_share / held_share, 4) if held_share > 0 else 0.0,
        continues=continues,
        follow=round(follow, 4),
        defines=round(defines, 4),
        instructs=round(instructs, 4),
    )
    return {
        "questions": questions,
        "weights": best_w,
        "left_out": len(questions) - len(readable),
        "fitting": figures(fitting, on_fitting, best_w),
        "held_out": figures(held, on_held, best_w),
        "scale": round(float(beta[0]), 3),
        "ridge": ridge,
        "shipped": {
            "weights": (shipped := weights.weights_for(settings.FOUNDRY.embedding.model)),
            "fitting": figures(fitting, on_fitting, shipped),
            "held_out": figures(held, on_held, shipped),
        },
    }


def write(result: dict, embedding_model: str, command: str, units_file: Path) -> None:
    data = json.loads(weights.DATA.read_text()) if weights.DATA.exists() else {"models": {}}
    data["about"] = (
        "The extractive reader's scoring weights, one set per embedding.model (generation/reader/weights.py), "
        "written by bench/fit_scoring.py: the grid combination whose best unit holds the answer most often."
    )
    data["models"][embedding_model] = {
        "weights": {k: getattr(result["weights"], k) for k in weights.NAMES},
        "fitted": {
            "command": command,
            "data": f"{units_file.relative_to(ROOT)}: " + ", ".join(sorted({q["source"] for q in result["questions"]})),
            "continues_tried": list(CONTINUES),
            "ridges_tried": list(RIDGES),
            "ridge": result["ridge"],
            "date": datetime.date.today().isoformat(),
            "machine": _common.machine_line(),
            "left_out": result["left_out"],
            "fitting": result["fitting"],
            "held_out": result["held_out"],
        },
    }
    weights.DATA.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--squad", type=Path, default=_common.DEFAULT_DATA.parent / "squad2" / "dev.json")
    parser.add_argument("--limit", type=int, default=150, help="SQuAD answerable questions per knowledge base at most")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--followups", type=Path, action="append", default=[], help="bench/followups.py --units results"
    )
    parser.add_argument(
        "--multilingual", type=Path, action="append", default=[], help="bench/multilingual.py --units dev results"
    )
    parser.add_argument("--units", type=Path, help="every question's units (written, or read by --refit)")
    parser.add_argument("--refit", action="store_true", help="fit on --units without asking or reading again")
    parser.add_argument("--write", action="store_true", help="store the weights for the configured embedding.model")
    args = parser.parse_args()
    embedding_model = settings.FOUNDRY.embedding.model
    units_file = (args.units or RESULTS / f"scoring_units_{embedding_model.replace('/', '_')}.json").resolve()
    start = time.perf_counter()
    command = "bench/fit_scoring.py " + " ".join(sys.argv[1:])
    if args.refit:
        kept = json.loads(units_file.read_text())
        questions, command = kept["questions"], f"{kept['command']} (collects the units), then {command}"
    else:
        questions = squad_questions(args.squad, args.limit, args.seed)
        for path in args.followups:
            questions += followup_questions(path)
        for path in args.multilingual:
            questions += manual_questions(path)
        questions = [q | {"units": compact(q["units"])} for q in questions]
        kept = {
            "embedding_model": embedding_model,
            "command": command,
            "columns": list(COLUMNS),
            "questions": questions,
        }
        units_file.write_text(json.dumps(kept) + "\n")
    result = fit(questions, args.seed)
    print(f"machine: {_common.machine_line()}; {time.perf_counter() - start:.0f} s")
    print("weights:", json.dumps({k: getattr(result["weights"], k) for k in weights.NAMES}))
    print("fitting: ", json.dumps(result["fitting"]))
    print("held out:", json.dumps(result["held_out"]))
    print(f"scale (the cosine's weight in the likelihood): {result['scale']}")
    for part in ("fitting", "held_out"):
        print(f"{part}, weights shipped before:", json.dumps(result["shipped"][part]))
    if args.write:
        write(result, embedding_model, command.strip(), units_file)
        print(f"written: {weights.DATA.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
