"""An ``Answer`` as OpenAI chat-completion bodies: the whole message, or ``chat.completion.chunk`` events.

The content is the answer with ``[1]``-style markers and a "Sources:" list ("Low confidence: …" between the two
when the answer is), so any chat client shows the citations and the warning without knowing Foundry; the
``foundry`` object carries them as data (chunk URL, lines, answer class, refusal reason, ``query_id``).
A refusal is an ordinary assistant message.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from generation.answers import Answer
from generation.answers.language import answering_in
from generation.condense import Condensed
from generation.models import QueryLog
from generation.present import BADGES
from sources.models import Chunk
from sources.viewer import viewer_url

_LABEL = re.compile(r"\[(S\d+)\]")
# A sentence ends after a citation marker (and any markers right after it), or, in a text without
# markers (a refusal), after . ! or ? followed by white space.
_AFTER_MARKER = re.compile(r"(?<=\])(\s+)(?!\[)")
_AFTER_STOP = re.compile(r"(?<=[.!?])(\s+)")


@dataclass(frozen=True)
class Reply:
    """One answer as a chat client gets it: its sentences (joined, the content), the Sources list and the data."""

    sentences: list[str]
    sources: str
    foundry: dict[str, Any]
    usage: dict[str, int]

    @property
    def content(self) -> str:
        return "".join(self.sentences) + self.sources


def reply_build(answer: Answer, *, query_id: int, condensed: Condensed, chunk_url: str, site_url: str = "") -> Reply:
    """``chunk_url`` is a template with ``{source_id}`` and ``{chunk_id}`` (the API's chunk endpoint); ``site_url``
    (``https://host``) goes in front of each citation's ``viewer_url``, the web viewer at its quoted lines."""
    numbers = {c["id"]: n for n, c in enumerate(answer.citations, start=1)}
    text = _LABEL.sub(lambda m: f"[{numbers[m.group(1)]}]" if m.group(1) in numbers else m.group(0), answer.answer)
    if answer.hint:
        text = f"{text}\n\n{answer.hint}"
    sources_of = dict(
        Chunk.objects.filter(pk__in=[c["chunk_id"] for c in answer.citations]).values_list("pk", "source_id")
    )
    citations = [
        {
            "id": numbers[c["id"]],
            "label": c["id"],
            "chunk_id": c["chunk_id"],
            "source": c["source"],
            "title": c["title"],
            "heading": c["heading"],
            "page": c["page"],
            "lines": c["lines"],
            "kind": c["kind"],
            "ocr_confidence": c["ocr_confidence"],
            "location": c["location"],
            "url": chunk_url.format(source_id=sources_of.get(c["chunk_id"], 0), chunk_id=c["chunk_id"]),
            "viewer_url": site_url + viewer_url(sources_of[c["chunk_id"]], c["chunk_id"], c["lines"])
            if c["chunk_id"] in sources_of
            else "",
        }
        for c in answer.citations
    ]
    sources = ""
    if citations:
        sources = "\n\nSources:\n" + "\n".join(f"[{c['id']}] {_where(c)}" for c in citations)
        if answer.answer_class == QueryLog.AnswerClass.LOW_CONFIDENCE:  # said in the text, as the ask page says it
            with answering_in(condensed.message or condensed.question):  # in the question's language
                sources = f"\n\n{BADGES[answer.answer_class][1]}.{sources}"
    foundry = {
        "query_id": query_id,
        "answer_class": answer.answer_class,
        "refusal": answer.refusal or None,
        "cached": answer.cached,
        "question": condensed.question,
        "message": condensed.message,
        "citations": citations,
    }
    prompt, completion = answer.tokens.get("prompt", 0), answer.tokens.get("completion", 0)
    usage = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
    return Reply(sentences_split(text), sources, foundry, usage)


class LiveNumbers:
    """``[S#]`` labels of streamed sentences as ``[n]``, numbered in order of first appearance: the order
    ``reply_build`` numbers the answer's citations in, so the streamed text equals the finished content."""

    def __init__(self) -> None:
        self.numbers: dict[str, int] = {}
        self.sent = ""

    def piece(self, text: str) -> str:
        def number(match: re.Match) -> str:
            return f"[{self.numbers.setdefault(match.group(1), len(self.numbers) + 1)}]"

        out = _LABEL.sub(number, text)
        self.sent += out
        return out

    def rest(self, reply: Reply) -> list[str]:
        """The reply's sentences not streamed yet (all of them for a refusal, which streams nothing)."""
        text = "".join(reply.sentences)
        if not text.startswith(self.sent):  # a bug, never a client's problem: fail loudly
            raise RuntimeError("streamed sentences differ from the finished answer")
        return sentences_split(text[len(self.sent) :]) if len(text) > len(self.sent) else []


def sentences_split(text: str) -> list[str]:
    """``text`` cut after each sentence, every piece keeping the white space after it: the pieces join to ``text``."""
    pattern = _AFTER_MARKER if re.search(r"\[\d+\]", text) else _AFTER_STOP
    parts = pattern.split(text)
    pieces = [parts[i] + (parts[i + 1] if i + 1 < len(parts) else "") for i in range(0, len(parts), 2)]
    return [p for p in pieces if p]


def _where(citation: dict[str, Any]) -> str:
    return f"{citation['source']}, {citation['location']}"


def completion_body(reply: Reply, *, completion_id: str, model: str) -> dict[str, Any]:
    """A ``chat.completion`` object."""
    message = {"role": "assistant", "content": reply.content, "refusal": None}
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": "stop", "logprobs": None}],
        "usage": reply.usage,
        "system_fingerprint": None,
        "foundry": reply.foundry,
    }


def chunk_events(
    reply: Reply,
    *,
    completion_id: str,
    model: str,
    created: int,
    include_usage: bool,
    sentences: list[str] | None = None,
) -> Iterator[dict]:
    """The ``chat.completion.chunk`` objects after the first (role) chunk: one per verified sentence (those of
    ``reply`` not streamed yet when ``sentences`` is given), the Sources list, the final one (finish_reason,
    ``foundry``), and the usage chunk when asked for."""
    for sentence in reply.sentences if sentences is None else sentences:
        yield chunk(completion_id, model, created, {"content": sentence})
    if reply.sources:
        yield chunk(completion_id, model, created, {"content": reply.sources})
    yield {**chunk(completion_id, model, created, {}, finish_reason="stop"), "foundry": reply.foundry}
    if include_usage:
        yield {**chunk(completion_id, model, created, {}), "choices": [], "usage": reply.usage}


def chunk(
    completion_id: str, model: str, created: int, delta: dict[str, Any], *, finish_reason: str | None = None
) -> dict[str, Any]:
    return {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "system_fingerprint": None,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}],
    }
