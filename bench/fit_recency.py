"""Fit ``retrieval.recency_weight``: how much a newer source is preferred in hybrid ranking (``recency_boost``).

    PYTHONPATH=. .venv/bin/python bench/fit_recency.py [--squad FILE] [--pairs 40] [--seed 0] [--write]

Data: SQuAD 2.0 dev, split by article at random (``--seed``) into a fitting half and a blind half, each its own
knowledge base: every paragraph is a document (its article's title, the paragraph's text), dated at random
between 2015 and 2025 (``Source.issued``, as a document's metadata would date it). Up to ``--pairs`` paragraphs
of each half with an answerable question get a second revision: the same text with one sentence that holds no
gold answer left out, dated 30 to 700 days before or after the first (either revision may be the newer, and
either may be the shorter), as a datasheet and its revision are two files that say nearly the same.

For each answerable question the real ``retrieve()`` runs once (weight 0, the fused list kept to 50), then
``recency_boost`` re-ranks it at every cell of the grid, as ``retrieve`` would, and the first ``top_k`` count:
- ``newer_first``: of the questions about a revised paragraph whose two revisions are both in the first
  ``top_k``, the share where the newer revision ranks above the older one (0.5 is a coin; dates ignored);
- ``hit@3``: of the questions about a paragraph without a revision, the share whose paragraph is among the first
  three, which random dates can only disturb (the cost of the weight).
The grid is ``retrieval.revision_overlap`` (which chunks are revisions of one another) × ``recency_weight``. The
cell kept is the one with the highest ``newer_first`` on the fitting half whose ``hit@3`` is at most one point
under weight 0's, the smallest weight, then the highest overlap, on a tie. Figures are reported for both halves;
``--write`` stores the weight, the overlap, the command, the data and the figures in retrieval/data/recency.json.
"""

from __future__ import annotations

import argparse
import datetime
import json
import random
import re
from pathlib import Path

import _common  # noqa: F401  (Django set-up)
from django.conf import settings
from django.test.utils import override_settings

from foundry_site.evaluation.beir import Document
from foundry_site.evaluation.index import cache_key, eval_index, file_name
from foundry_site.evaluation.squad import Article, load_squad, normalize_answer
from retrieval.fusion import Hit, recency_boost, word_set
from retrieval.services.retrieve import chunk_facts, retrieve
from sources.models import Source
from sources.services.prepare import file_digest

WEIGHTS = (0.0, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0)
OVERLAPS = (0.5, 0.6, 0.7, 0.8, 0.9)
DEPTH = 50
OUT = Path(__file__).resolve().parent.parent / "retrieval" / "data" / "recency.json"
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")


def _shortened(text: str, answers: set[str], rng: random.Random) -> str | None:
    """``text`` without one sentence that holds none of ``answers`` (None when no such sentence can go)."""
    sentences = _SENTENCE_END.split(text)
    if len(sentences) < 3:
        return None
    free = [i for i, s in enumerate(sentences) if not any(a and a in normalize_answer(s) for a in answers)]
    if not free:
        return None
    drop = rng.choice(free)
    return " ".join(s for i, s in enumerate(sentences) if i != drop)


def build(articles: list[Article], *, pairs: int, rng: random.Random) -> tuple[list[Document], dict, list]:
    """The documents, each document's date, and the questions: (question, paragraph doc id, revision doc id)."""
    documents: list[Document] = []
    dates: dict[str, datetime.datetime] = {}
    start = datetime.datetime(2015, 1, 1, tzinfo=datetime.UTC)
    questions = []
    candidates = []
    for article in articles:
        by_paragraph: dict[int, list] = {}
        for q in article.questions:
            if not q.impossible:
                by_paragraph.setdefault(q.paragraph, []).append(q)
        for n, text in enumerate(article.paragraphs):
            doc_id = f"{article.title}-{n:03}"
            documents.append(Document(doc_id, article.title.replace("_", " "), text))
            dates[doc_id] = start + datetime.timedelta(days=rng.uniform(0, 3650))
            asked = by_paragraph.get(n, [])
            if asked:
                candidates.append((doc_id, text, asked))
    rng.shuffle(candidates)
    place = {d.doc_id: i for i, d in enumerate(documents)}
    revised = 0
    for doc_id, text, asked in candidates:
        answers = {normalize_answer(a) for q in asked for a in q.answers}
        shorter = _shortened(text, answers, rng) if revised < pairs else None
        if shorter is None:
            questions += [(q, doc_id, None) for q in asked]
            continue
        revised += 1
        revision = f"{doc_id}-rev"
        first, second = (text, shorter) if rng.random() < 0.5 else (shorter, text)
        title = documents[place[doc_id]].title
        documents[place[doc_id]] = Document(doc_id, title, first)
        documents.append(Document(revision, title, second))
        shift = datetime.timedelta(days=rng.uniform(30, 700)) * (1 if rng.random() < 0.5 else -1)
        dates[revision] = dates[doc_id] + shift
        questions.append((asked[0], doc_id, revision))
    return documents, dates, questions


def measure(articles: list[Article], *, name: str, pairs: int, seed: int, squad: Path) -> dict:
    rng = random.Random(seed)
    documents, dates, questions = build(articles, pairs=pairs, rng=rng)
    key = cache_key(
        data_sha256=file_digest(squad), extra={"recency": name, "seed": seed, "pairs": pairs, "docs": len(documents)}
    )
    top_k = settings.FOUNDRY.retrieval.top_k
    with eval_index(name=f"recency-{name}", key=key, documents=documents) as index:
        for doc_id, when in dates.items():
            Source.objects.filter(path=file_name(doc_id)).update(issued=when)
        chunk_doc = index.doc_of_chunk
        plain = {"recency_weight": 0.0, "revision_overlap": 1.0, "top_k": DEPTH}
        conf = settings.FOUNDRY.with_overrides(retrieval=plain)
        rankings = []
        with override_settings(FOUNDRY=conf):
            for question, doc_id, revision in questions:
                found = retrieve(question=question.question, collection_ids=None, model_steps=False)
                hits = [Hit(c.chunk.pk, c.fused) for c in found.ranked]
                facts = chunk_facts([h.chunk_id for h in hits])
                rankings.append((hits, facts, word_set(question.question), doc_id, revision))
    grid = {}
    for overlap in OVERLAPS:
        for weight in WEIGHTS:
            newer_first = both = hit3 = plain = 0
            for hits, facts, asked, doc_id, revision in rankings:
                ranked = recency_boost(hits, facts, weight=weight, overlap=overlap, asked=asked)[:top_k]
                docs = [chunk_doc.get(h.chunk_id) for h in ranked]
                if revision is None:
                    plain += 1
                    hit3 += doc_id in docs[:3]
                    continue
                if doc_id in docs and revision in docs:
                    both += 1
                    newer = revision if dates[revision] > dates[doc_id] else doc_id
                    older = doc_id if newer == revision else revision
                    newer_first += docs.index(newer) < docs.index(older)
            grid[f"{overlap:g}/{weight:g}"] = {
                "overlap": overlap,
                "weight": weight,
                "newer_first": round(newer_first / both, 4) if both else None,
                "pairs_both_found": both,
                "hit@3": round(hit3 / plain, 4) if plain else None,
                "questions_plain": plain,
            }
    return {
        "articles": sorted(a.title for a in articles),
        "documents": len(documents),
        "revised": sum(1 for _, _, r in questions if r),
        "grid": grid,
    }


def choose(fit: dict) -> dict:
    """The fitting half's best cell: highest ``newer_first`` with ``hit@3`` at most a point under weight 0's;
    on a tie the smallest weight, then the highest overlap (the least that moves)."""
    rows = list(fit["grid"].values())
    floor = min(r["hit@3"] for r in rows if r["weight"] == 0) - 0.01
    allowed = [r for r in rows if r["hit@3"] >= floor and r["newer_first"] is not None]
    best = max(allowed, key=lambda r: (r["newer_first"], -r["weight"], r["overlap"]))
    return {"weight": best["weight"], "overlap": best["overlap"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--squad", type=Path, default=_common.DEFAULT_DATA.parent / "squad2" / "dev.json")
    parser.add_argument("--pairs", type=int, default=40, help="paragraphs per half given a second revision")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--write", action="store_true", help="store the fitted weight in retrieval/data/recency.json")
    args = parser.parse_args()
    articles = load_squad(args.squad)
    order = list(articles)
    random.Random(args.seed).shuffle(order)
    half = len(order) // 2
    fit = measure(order[:half], name="fit", pairs=args.pairs, seed=args.seed, squad=args.squad)
    print(json.dumps({"fit": fit["grid"]}, indent=1), flush=True)
    chosen = choose(fit)
    blind = measure(order[half:], name="blind", pairs=args.pairs, seed=args.seed + 1, squad=args.squad)
    cell = f"{chosen['overlap']:g}/{chosen['weight']:g}"
    result = {
        **chosen,
        "command": "PYTHONPATH=. .venv/bin/python bench/fit_recency.py "
        f"--pairs {args.pairs} --seed {args.seed}" + (" --write" if args.write else ""),
        "data": f"SQuAD 2.0 dev ({args.squad.name}, sha256 {file_digest(args.squad)[:16]}), split by article",
        "embedding_model": settings.FOUNDRY.embedding.model,
        "rule": "highest newer_first on the fitting half with hit@3 at most 1 point under weight 0's",
        "fitted": datetime.date.today().isoformat(),
        "machine": _common.machine_line(),
        "figures": {
            "fit": {"chosen": fit["grid"][cell], "weight_0": fit["grid"][f"{chosen['overlap']:g}/0"]},
            "blind": {"chosen": blind["grid"][cell], "weight_0": blind["grid"][f"{chosen['overlap']:g}/0"]},
        },
        "fit": fit,
        "blind": blind,
    }
    print(json.dumps({**chosen, "figures": result["figures"]}, indent=1))
    if args.write:
        OUT.parent.mkdir(parents=True, exist_ok=True)
        OUT.write_text(json.dumps(result, indent=1) + "\n")
        print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
