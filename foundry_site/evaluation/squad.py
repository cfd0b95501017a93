"""SQuAD 2.0 loader and the official answer normalisation, EM and F1.

``normalize_answer``, ``exact_match`` and ``f1_score`` follow the official
``evaluate-v2.0.py`` exactly (lower case, drop punctuation and English articles,
collapse whitespace; token-level F1; a no-answer question scores 1 only for the
empty prediction), so CI can score without the official file at hand.
"""

from __future__ import annotations

import collections
import json
import re
import string
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from foundry_site.evaluation.beir import EvalDataError, json_error

_T = TypeVar("_T")

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = set(string.punctuation)


@dataclass(frozen=True)
class Question:
    qid: str
    question: str
    answers: tuple[str, ...]
    impossible: bool
    article: str
    paragraph: int


@dataclass
class Article:
    title: str
    paragraphs: list[str] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)


def normalize_answer(text: str) -> str:
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction: str, golds: tuple[str, ...] | list[str]) -> float:
    return float(max(normalize_answer(g) == normalize_answer(prediction) for g in (golds or [""])))


def _f1(gold: str, prediction: str) -> float:
    gold_tokens, pred_tokens = normalize_answer(gold).split(), normalize_answer(prediction).split()
    if not gold_tokens or not pred_tokens:
        return float(gold_tokens == pred_tokens)
    common = sum((collections.Counter(gold_tokens) & collections.Counter(pred_tokens)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(pred_tokens), common / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def f1_score(prediction: str, golds: tuple[str, ...] | list[str]) -> float:
    return max(_f1(g, prediction) for g in (golds or [""]))


def _need(node: object, key: str, kind: type[_T], where: str, path: Path) -> _T:
    if not isinstance(node, dict) or key not in node:
        raise EvalDataError(f"{path}: {where}: missing '{key}'")
    value = node[key]
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise EvalDataError(f"{path}: {where}.{key}: expected {kind.__name__}, got {type(value).__name__}")
    return value


def _question(qa: dict, where: str, path: Path, title: str, paragraph: int) -> Question:
    qid = _need(qa, "id", str, where, path)
    text = _need(qa, "question", str, where, path)
    impossible = bool(qa.get("is_impossible", False))
    answers = _need(qa, "answers", list, where, path)
    golds = tuple(_need(a, "text", str, f"{where}.answers[{n}]", path) for n, a in enumerate(answers))
    if not impossible and not golds:
        raise EvalDataError(f"{path}: {where} (id {qid}): answerable question without answers")
    return Question(qid, text, () if impossible else golds, impossible, title, paragraph)


def load_squad(path: Path) -> list[Article]:
    """The official SQuAD 2.0 layout: ``data[].paragraphs[].qas[]``; errors name file and position."""
    if not path.is_file():
        raise EvalDataError(f"{path}: no such file")
    try:
        root = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise EvalDataError(f"{path}:{exc.lineno}:{exc.colno}: not valid JSON ({json_error(exc)})") from None
    except UnicodeDecodeError:
        raise EvalDataError(f"{path}: not UTF-8 text") from None
    articles, seen = [], set()
    for i, node in enumerate(_need(root, "data", list, "top level", path)):
        title = _need(node, "title", str, f"data[{i}]", path)
        article = Article(title)
        for j, para in enumerate(_need(node, "paragraphs", list, f"data[{i}]", path)):
            article.paragraphs.append(_need(para, "context", str, f"data[{i}].paragraphs[{j}]", path))
            for k, qa in enumerate(_need(para, "qas", list, f"data[{i}].paragraphs[{j}]", path)):
                question = _question(qa, f"data[{i}].paragraphs[{j}].qas[{k}]", path, title, j)
                if question.qid in seen:
                    raise EvalDataError(f"{path}: data[{i}].paragraphs[{j}].qas[{k}]: duplicate id {question.qid}")
                seen.add(question.qid)
                article.questions.append(question)
        articles.append(article)
    if not articles:
        raise EvalDataError(f"{path}: no articles in 'data'")
    return articles
