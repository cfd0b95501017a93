"""BEIR-format loaders: corpus.jsonl, queries.jsonl and qrels .tsv.

Every error names the file and the line, so a broken download is found at once
instead of turning into a quietly wrong score.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path


class EvalDataError(ValueError):
    """An evaluation file is missing or malformed; the message names file and line."""


def json_error(exc: json.JSONDecodeError) -> str:
    """The decoder's reason with its column ("Invalid control character at" alone ends mid-sentence)."""
    return f"{exc.msg} column {exc.colno}" if exc.msg.endswith(" at") else f"{exc.msg} at column {exc.colno}"


@dataclass(frozen=True)
class Document:
    doc_id: str
    title: str
    text: str


def _json_lines(path: Path) -> Iterator[tuple[int, dict]]:
    if not path.is_file():
        raise EvalDataError(f"{path}: no such file")
    with path.open(encoding="utf-8") as handle:
        try:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line.rstrip("\r\n"))  # without its line end, so a column is on this line
                except json.JSONDecodeError as exc:
                    raise EvalDataError(f"{path}:{number}: not valid JSON ({json_error(exc)})") from None
                if not isinstance(row, dict):
                    raise EvalDataError(f"{path}:{number}: expected a JSON object, got {type(row).__name__}")
                yield number, row
        except UnicodeDecodeError:
            raise EvalDataError(f"{path}: not UTF-8 text") from None


def _field(row: dict, key: str, path: Path, number: int, *, required: bool = True) -> str:
    value = row.get(key, None if required else "")
    if value is None and not required:
        return ""
    if isinstance(value, int) and not isinstance(value, bool) and key == "_id":
        return str(value)
    if not isinstance(value, str):
        what = "missing" if key not in row else f"a {type(value).__name__}, expected a string"
        raise EvalDataError(f"{path}:{number}: field '{key}' is {what}")
    if key == "_id" and not value.strip():
        raise EvalDataError(f"{path}:{number}: field '_id' is empty")
    return value


def load_corpus(path: Path) -> dict[str, Document]:
    """``{"_id", "title", "text"}`` per line; ids must be unique."""
    corpus: dict[str, Document] = {}
    for number, row in _json_lines(path):
        doc_id = _field(row, "_id", path, number)
        if doc_id in corpus:
            raise EvalDataError(f"{path}:{number}: duplicate _id {doc_id!r}")
        corpus[doc_id] = Document(
            doc_id, _field(row, "title", path, number, required=False), _field(row, "text", path, number)
        )
    if not corpus:
        raise EvalDataError(f"{path}: no documents")
    return corpus


def load_queries(path: Path) -> dict[str, str]:
    """``{"_id", "text"}`` per line; ids must be unique and texts non-empty."""
    queries: dict[str, str] = {}
    for number, row in _json_lines(path):
        query_id = _field(row, "_id", path, number)
        text = _field(row, "text", path, number)
        if query_id in queries:
            raise EvalDataError(f"{path}:{number}: duplicate _id {query_id!r}")
        if not text.strip():
            raise EvalDataError(f"{path}:{number}: query {query_id!r} has empty text")
        queries[query_id] = text
    if not queries:
        raise EvalDataError(f"{path}: no queries")
    return queries


def load_qrels(path: Path) -> dict[str, dict[str, int]]:
    """Tab-separated ``query-id corpus-id score`` (BEIR's header line optional)."""
    if not path.is_file():
        raise EvalDataError(f"{path}: no such file")
    qrels: dict[str, dict[str, int]] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.split("\t")
        if len(parts) == 4:  # TREC style: query-id, iteration, corpus-id, score
            parts = [parts[0], parts[2], parts[3]]
        if len(parts) != 3:
            raise EvalDataError(
                f"{path}:{number}: expected 3 tab-separated columns (query-id, corpus-id, score), found {len(parts)}"
            )
        query_id, doc_id, score = (p.strip() for p in parts)
        if number == 1 and score.lower() in ("score", "relevance", "rel"):
            continue  # the header line
        if not score.lstrip("-").isdigit():
            raise EvalDataError(f"{path}:{number}: score {score!r} is not an integer")
        if not query_id or not doc_id:
            raise EvalDataError(f"{path}:{number}: empty query-id or corpus-id")
        qrels.setdefault(query_id, {})[doc_id] = int(score)
    if not qrels:
        raise EvalDataError(f"{path}: no judgments")
    return qrels


def judged_queries(
    queries: dict[str, str], qrels: dict[str, dict[str, int]], corpus: dict[str, Document], *, qrels_path: Path
) -> dict[str, str]:
    """Queries that have at least one relevant judgment, in qrels order.

    A judgment naming a query missing from the queries file or a document missing
    from the corpus means the files do not belong together, which would silently
    drop queries or lower every score: that is an error naming the qrels line.
    """
    for query_id, docs in qrels.items():
        if query_id not in queries:
            raise EvalDataError(
                f"{qrels_path}:{_qrels_line(qrels_path, query_id)}: query {query_id!r} is not in the queries file"
            )
        for doc_id in docs:
            if doc_id not in corpus:
                raise EvalDataError(
                    f"{qrels_path}:{_qrels_line(qrels_path, query_id, doc_id)}: query {query_id!r} "
                    f"judges document {doc_id!r}, which is not in the corpus"
                )
    return {q: queries[q] for q, docs in qrels.items() if any(g > 0 for g in docs.values())}


def _qrels_line(path: Path, query_id: str, doc_id: str | None = None) -> int:
    """The number of the first line of ``path`` judging ``query_id`` (and ``doc_id``), for an error message."""
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        parts = [p.strip() for p in line.split("\t")]
        if parts[0] == query_id and (doc_id is None or doc_id in parts[1:-1]):
            return number
    return 0
