"""The audit trail of answers: a question's query-log row and runs.csv line, and answers served again
from the log (an identical question, scope, configuration and index)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from django.conf import settings
from django.utils.translation import gettext

from core import prompts
from generation import audit
from generation.answers.answer import Answer, elapsed_ms
from generation.audit_chain import query_record, text_sha256
from generation.answers.language import answering_in
from generation.models import Conversation, QueryLog
from retrieval.services.gate import NO_EVIDENCE_HINT
from sources.models import Chunk
from sources.selectors import index_version

# The code that decides what an answer is (retrieval, the gate, the readers, grounding, condensing, citations).
ANSWERING_PACKAGES = ("generation", "retrieval", "core")


def code_digest(root: Path, packages: tuple[str, ...] = ANSWERING_PACKAGES) -> str:
    """A digest of the Python source and the data files (``data/*.json``: language data, fitted models and thresholds)
    under ``packages`` of ``root`` (migrations aside): part of every answer-cache key, so an upgraded install never
    serves an answer that rules or a model it no longer has let through."""
    digest = hashlib.sha256()
    for package in packages:
        paths = [*(root / package).rglob("*.py"), *(root / package).rglob("data/*.json")]
        for path in sorted(paths):
            if "migrations" not in path.parts:
                digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


@cache
def answering_code() -> str:
    """The digest of this install's answering code (``code_digest``), read once, when the first key is made."""
    return code_digest(Path(__file__).resolve().parents[2])


# The answer's fields that its query-log row holds under the same names (``answer_record``). An answer served
# again from the log takes them back (``answer_cached``), all but RUN_COLUMNS: what belongs to the run that wrote it.
ANSWER_COLUMNS = (
    "answer_class",
    "answer",
    "conflicts",
    "coverage",
    "refusal",
    "gate",
    "model",
    "mode",
    "hyde_text",
    "cost",
    "llm_calls",
    "timings",
    "grounding",
    "cached",
)
RUN_COLUMNS = ("cost", "llm_calls", "timings", "grounding", "cached")


@dataclass(frozen=True)
class Asked:
    """Who asked, in which scope and conversation: what a question's log row records beside its answer.

    ``message``: the asker's raw follow-up when the question answered is the standalone question made of it
    (generation/condense/); it is logged beside the question, and the extractive reader reads what the
    asker typed from it (``answers.compose``).
    ``conversation``: the Conversation the question is a turn of.
    ``quoted``: with ``message``, the sentences the answer of the earlier turn the follow-up's topic came from
    quoted (read back from that turn's stored audit, ``reader.stored_quotes``); the passages holding them are read
    too, and the extractive reader ranks their units higher (``retrieve``'s ``quoted``).
    """

    user: Any = None
    collection_ids: list[int] | None = None
    message: str = ""
    conversation: Conversation | None = None
    quoted: tuple[str, ...] = ()


def cache_key(
    question: str,
    collection_ids: list[int] | None,
    mode: str | None,
    top_k: int | None,
    *,
    message: str = "",
    quoted: tuple[str, ...] = (),
) -> str:
    """Everything an answer depends on: question, the follow-up it was made from and the answer it follows, scope,
    mode, configuration, the answer prompts' text (a template edited in place keeps its path), the answering
    code (``answering_code``) and the index version."""
    scope = sorted(collection_ids) if collection_ids is not None else None
    material = json.dumps(
        [
            question.casefold(),
            message.casefold(),
            list(quoted),
            scope,
            mode,
            top_k,
            settings.FOUNDRY.model_dump(mode="json"),
            prompts.render("answer_system"),
            prompts.render("answer_user"),
            answering_code(),
            index_version(scope),
        ],
        sort_keys=True,
    )
    return hashlib.sha256(material.encode("utf-8")).hexdigest()


def answer_cached(
    key: str, *, question: str, run_id: str, started: float, asked: Asked
) -> tuple[Answer, QueryLog] | None:
    """The answer logged under ``key`` (the newest that succeeded), logged again as this question's row;
    None when there is none, or a passage it cited is gone or no longer the text it quoted."""
    hit = QueryLog.objects.filter(cache_key=key, status=QueryLog.Status.OK).order_by("-created_at").first()
    if hit is None:
        return None
    texts = dict(Chunk.objects.filter(pk__in=[c["chunk_id"] for c in hit.citations]).values_list("pk", "text"))
    if len(texts) != len(hit.citations) or any(
        c.get("text_sha256", text_sha256(texts[c["chunk_id"]])) != text_sha256(texts[c["chunk_id"]])
        for c in hit.citations
    ):
        return None
    answer = Answer(
        run_id=run_id,
        question=question,
        **{name: getattr(hit, name) for name in ANSWER_COLUMNS if name not in RUN_COLUMNS},
        citations=[{**_uncited(c), "text": texts[c["chunk_id"]]} for c in hit.citations],
        cached=True,
        tokens={"prompt": 0, "completion": 0},
        hint=_cached_hint(hit.refusal, question),
    )
    answer.timings = {"total": elapsed_ms(started)}
    return answer, answer_record(answer, asked=asked, channels=hit.channels, cache_key=key)


def _cached_hint(refusal: str, question: str) -> str:
    """The hint a cached refusal by the gate carries, in its question's language, as ``compose`` wrote it."""
    if refusal != "gate":
        return ""
    with answering_in(question):
        return gettext(NO_EVIDENCE_HINT)


def answer_record(
    answer: Answer, *, asked: Asked, channels: dict[str, Any], cache_key: str = "", error: Exception | None = None
) -> QueryLog:
    """Write the question's query-log row and its runs.csv line; returns the row.

    ``channels``: the chunk ids and scores each search channel found. ``cache_key``: what the answer may be
    served again under (``cache_key()``). ``error``: the model failure that ended the answer; the row is then
    logged as failed, with the error's text.
    """
    return querylog_row(
        run_id=answer.run_id,
        task_name="rag_query",
        user=asked.user,
        question=answer.question,
        message=asked.message,
        conversation=asked.conversation,
        collection_ids=asked.collection_ids,
        channels=channels,
        citations=[_cited(c) for c in answer.citations],
        **{name: getattr(answer, name) for name in ANSWER_COLUMNS},
        prompt_tokens=answer.tokens.get("prompt", 0),
        completion_tokens=answer.tokens.get("completion", 0),
        cache_key=cache_key,
        status=QueryLog.Status.OK if error is None else QueryLog.Status.FAILED,
        error="" if error is None else str(error),
    )


def querylog_row(
    *, run_id: str, task_name: str, user: Any, citations: list[dict], timings: dict[str, float], **fields: Any
) -> QueryLog:
    """Write one query-log row and its runs.csv line (task ``task_name``): the one place a query is logged.

    ``citations`` lose their passage text (the row names chunks; the chunk holds the text). ``fields`` are
    QueryLog's other columns; ``timings`` needs its ``total``. Every call appends: nothing is updated.
    """
    user = _user(user)
    row = query_record(
        run_id=run_id,
        user=user,
        citations=[{k: v for k, v in c.items() if k != "text"} for c in citations],
        timings=timings,
        **fields,
    )
    audit.runs_append(
        run_id=run_id,
        task_name=task_name,
        status="ok" if row.status == QueryLog.Status.OK else "failed",
        answer_class=row.answer_class,
        llm_calls=row.llm_calls,
        latency_ms=timings["total"],
        model=row.model,
        user=user,
    )
    return row


def _cited(citation: dict[str, Any]) -> dict[str, Any]:
    """A citation as logged: the passage's text is left out, its SHA-256 kept, so the audit chain proves
    which text was quoted (generation/audit_chain.py)."""
    return {**_uncited(citation), "text_sha256": text_sha256(citation["text"])}


def _uncited(citation: dict[str, Any]) -> dict[str, Any]:
    """A citation as an answer shows it: without the text and the hash the log keeps."""
    return {k: v for k, v in citation.items() if k not in ("text", "text_sha256")}


def _user(user: Any) -> Any:
    return user if getattr(user, "is_authenticated", False) else None
