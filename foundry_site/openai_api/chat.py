"""Chat requests: parsing an OpenAI ``/v1/chat/completions`` body, the models a user may call, and answering.

Stateless, as in the OpenAI API: ``messages`` is the whole conversation. The last message must be the
user's question; the earlier user messages feed the condensing step (generation/condense/), which
makes the question standalone before retrieval. Rate limit, scope, answer cache and the audit row are
the ones ``POST /api/v1/query`` uses (``query_admit`` and ``answer_logged``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from foundry_site.openai_api.errors import OpenAIError, invalid
from core.ratelimit import RateLimited
from generation.answers import Answer, Asked, QueryError, Sentences, answer_logged
from generation.asking import query_admit
from generation.condense import Condensed, question_standalone
from generation.reader import quoted_sentences
from sources.selectors import readable_collections

ALL_MODEL = "foundry"
PREFIX = "foundry/"
ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})


@dataclass(frozen=True)
class ChatRequest:
    model: str
    messages: list[tuple[str, str]]  # (role, text)
    stream: bool
    include_usage: bool

    @property
    def question(self) -> str:
        return self.messages[-1][1]

    @property
    def history(self) -> list[str]:
        """The earlier user messages, oldest first (what the condensing step reads)."""
        return [text for role, text in self.messages[:-1] if role == "user"]

    @property
    def replies(self) -> list[str]:
        """The assistant's answer to each earlier user message (its messages up to the next user message)."""
        replies: list[str] = []
        for role, text in self.messages[:-1]:
            if role == "user":
                replies.append("")
            elif role == "assistant" and replies:
                replies[-1] = f"{replies[-1]}\n{text}".strip()
        return replies


@dataclass(frozen=True)
class Prepared:
    scope: list[int] | None
    message: str
    history: list[str]
    replies: list[str]


def model_ids(user: Any) -> list[tuple[str, str]]:
    """(model id, description) for ``user``: ``foundry`` (every readable collection) and one per collection."""
    names = list(readable_collections(user).order_by("name").values_list("name", flat=True))
    return [(ALL_MODEL, "Every collection you can read")] + [(PREFIX + n, f"The collection {n}") for n in names]


def model_scope(user: Any, model: str) -> int | None:
    """The collection a model id names (None: all readable ones); 404 for any other id, including another
    user's collection, so a model id tells nothing about collections the caller cannot read."""
    if model == ALL_MODEL:
        return None
    if model.startswith(PREFIX):
        pk = readable_collections(user).filter(name=model[len(PREFIX) :]).values_list("pk", flat=True).first()
        if pk is not None:
            return pk
    raise OpenAIError(
        f"The model '{model}' does not exist or you do not have access to it. GET /v1/models lists yours.",
        status=404,
        code="model_not_found",
        param="model",
    )


def chat_request_parse(body: bytes) -> ChatRequest:
    """The request, or OpenAIError 400 naming the field at fault."""
    try:
        data = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise invalid("The request body is not valid JSON.", param=None) from None
    if not isinstance(data, dict):
        raise invalid("The request body must be a JSON object.", param=None)
    model = data.get("model")
    if not isinstance(model, str) or not model.strip():
        raise invalid("'model' is required: a model id from GET /v1/models, e.g. 'foundry'.", param="model")
    stream = data.get("stream", False)
    if not isinstance(stream, bool) and stream is not None:
        raise invalid("'stream' must be true or false.", param="stream")
    options = data.get("stream_options") or {}
    if not isinstance(options, dict) or not isinstance(options.get("include_usage", False), bool):
        raise invalid("'stream_options' must be an object like {\"include_usage\": true}.", param="stream_options")
    if data.get("n", 1) not in (1, None):
        raise invalid("'n' must be 1: Foundry gives one answer per question.", param="n")
    messages = _messages(data.get("messages"))
    return ChatRequest(model.strip(), messages, bool(stream), options.get("include_usage", False))


def _messages(raw: Any) -> list[tuple[str, str]]:
    if not isinstance(raw, list) or not raw:
        raise invalid("'messages' must be a non-empty list of {role, content} objects.", param="messages")
    messages = []
    for i, message in enumerate(raw):
        if not isinstance(message, dict) or message.get("role") not in ROLES:
            raise invalid(
                f"messages[{i}] needs a 'role': one of {', '.join(sorted(ROLES))}.", param=f"messages[{i}].role"
            )
        messages.append((message["role"], _text(message.get("content"), i)))
    if messages[-1][0] != "user":
        raise invalid(
            "The last message must be the user's question (role 'user').", param=f"messages[{len(messages) - 1}].role"
        )
    return messages


def _text(content: Any, i: int) -> str:
    """A message's text: a string, or the text parts of a content list (clients such as LibreChat send those)."""
    if content is None or isinstance(content, str):
        return content or ""
    if isinstance(content, list) and all(isinstance(p, dict) for p in content):
        if any(p.get("type") != "text" or not isinstance(p.get("text"), str) for p in content):
            raise invalid(
                f"messages[{i}].content: only text parts are supported (no images or files).",
                param=f"messages[{i}].content",
            )
        return "\n".join(p["text"] for p in content)
    raise invalid(f"messages[{i}].content must be a string or a list of text parts.", param=f"messages[{i}].content")


def chat_prepare(*, user: Any, chat: ChatRequest) -> Prepared:
    """Resolve the model (404), check there is a question (400), and count it against the rate limit (429).

    Runs before any response is started, so every refusal of the request is an HTTP status.
    """
    within = model_scope(user, chat.model)
    if not chat.question.strip():
        raise invalid("The last user message is empty: send a question.", param=f"messages[{len(chat.messages) - 1}]")
    try:
        scope = query_admit(user=user)
    except RateLimited as exc:
        raise OpenAIError(
            str(exc), status=429, type="requests", code="rate_limit_exceeded", retry_after=exc.retry_after
        ) from None
    except QueryError as exc:
        raise OpenAIError(str(exc), status=403, type="permission_error", code="no_collections") from None
    return Prepared([within] if within is not None else scope, chat.question, chat.history, chat.replies)


@dataclass(frozen=True)
class Answered:
    """A chat question answered: the answer, the question as answered, and its query-log row's id."""

    answer: Answer
    condensed: Condensed
    query_id: int


def chat_answer(*, user: Any, prepared: Prepared, on_sentence: Sentences | None = None) -> Answered:
    """Make the question standalone (``retrieval.condense_model``) and answer it within the prepared scope;
    one QueryLog row holds the question answered and, when it was rewritten, the message as typed.
    ``on_sentence`` is told each sentence once it has passed its check (``answer_logged``)."""
    condensed = question_standalone(message=prepared.message, history=prepared.history, collection_ids=prepared.scope)
    asked = Asked(
        user=user,
        collection_ids=prepared.scope,
        message=condensed.message if condensed.rewritten else "",
        # stateless: the client's copy of the answer it follows is all there is to read what that answer quoted
        quoted=quoted_sentences(condensed.follows(prepared.replies) or ""),
    )
    answer, row = answer_logged(condensed.question, asked=asked, on_sentence=on_sentence)
    return Answered(answer, condensed, row.pk)
