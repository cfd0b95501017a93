"""The MCP server (official ``mcp`` SDK): Foundry's tools and resources, acting as one user.

The transports set the acting user in ``ACTING_USER`` before the SDK runs: ``foundry mcp``
(stdio) once for the process, the ``/mcp`` view (``foundry_site.mcp.http``) per request. The
SDK's handlers run in tasks that inherit that context; the Django work runs on a worker thread
(``anyio.to_thread``, which carries the context along), because the ORM refuses to run inside
an event loop. Each call closes its thread's database connections when it ends: a worker
thread may be reused by another call, or end with its event loop.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable
from contextvars import ContextVar
from typing import Annotated, Any

import anyio
from django.db import connections
from mcp.server.lowlevel.server import Server
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError
from mcp.types import Resource, ToolAnnotations
from pydantic import Field

from core import llm
from foundry_site.mcp import tools
from core.ratelimit import RateLimited
from generation.answers import MAX_QUESTION_CHARS, QueryError, QueryFailed
from sources.vectorstore import MissingEmbeddings

logger = logging.getLogger(__name__)

ACTING_USER: ContextVar[Any] = ContextVar("foundry_mcp_acting_user")

# Failures the caller can act on (or must wait out): returned as tool errors with their message.
# Anything else is a bug: the SDK logs its traceback and the caller gets only "Error executing tool".
EXPECTED = (tools.ToolInputError, QueryError, RateLimited, MissingEmbeddings, QueryFailed, llm.LLMError)

INSTRUCTIONS = (
    "Foundry is a source-bounded knowledge base: it answers only from the documents indexed in the "
    "collections you can read, cites every claim, and refuses when the documents do not hold the answer. "
    "Use `search` to find passages (no language model involved), `ask` for a verified answer with "
    "citations, `get_chunk` to read a passage and its surroundings, and `list_collections` / "
    "`list_sources` to see what is indexed. Each source is also a resource, foundry://source/{id}."
)

READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
QUERY = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)

Query = Annotated[
    str, Field(description=f"What to look for, in natural language (1 to {MAX_QUESTION_CHARS} characters).")
]
Question = Annotated[
    str, Field(description=f"The question, in natural language (1 to {MAX_QUESTION_CHARS} characters).")
]
CollectionName = Annotated[
    str | None,
    Field(
        description="Only this collection (a name from list_collections); omit to use every collection you can read."
    ),
]


def acting_user() -> Any:
    user = ACTING_USER.get(None)
    if user is None or not user.is_active:
        raise tools.ToolInputError("No user: the server has no authenticated user for this call.")
    return user


async def run_as_user(fn: Callable[..., Any], /, **kwargs: Any) -> Any:
    """``fn(user, **kwargs)`` on a worker thread for the acting user; expected failures become ``ToolInputError``."""
    return await anyio.to_thread.run_sync(functools.partial(_in_thread, fn, kwargs))


def _in_thread(fn: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    try:
        user = acting_user()
        # Queries also get their QueryLog row; this line records the reads (ids only, never text).
        logger.info("mcp %s user=%s", fn.__name__, user.pk)
        return fn(user, **kwargs)
    finally:
        connections.close_all()  # this thread's connections only (they are thread-local)


async def call_tool(fn: Callable[..., Any], /, **kwargs: Any) -> Any:
    try:
        return await run_as_user(fn, **kwargs)
    except EXPECTED as exc:
        raise ToolError(str(exc)) from None


class FoundryMCP(MCPServer):
    """MCPServer whose resource list is the acting user's readable sources (it differs per user)."""

    async def list_resources(self) -> list[Resource]:
        refs = await run_as_user(tools.readable_source_refs)
        return [
            Resource(
                uri=r["uri"],
                name=r["name"],
                title=r["title"],
                description=r["description"],
                mime_type="application/json",
            )
            for r in refs
        ]

    @property
    def lowlevel(self) -> Server[Any]:
        """The SDK's low-level server, which the stateless HTTP bridge hands to its session manager."""
        return self._lowlevel_server


@functools.cache
def foundry_server() -> FoundryMCP:
    """The one server of this process (its tools hold no per-user state)."""
    server = FoundryMCP(name="foundry", title="Foundry knowledge base", instructions=INSTRUCTIONS)
    _add_tools(server)
    _add_resources(server)
    return server


def _add_tools(server: FoundryMCP) -> None:
    @server.tool(
        name="search",
        annotations=QUERY,
        description=(
            "Find the passages (chunks) of the indexed documents that best match `query`, best first, each with "
            "its text, source, heading, page, lines and similarity score, and the evidence gate's verdict "
            "(`gate.passed`: whether the documents hold enough evidence to answer; `passes_gate` per passage). "
            "No language model is called. Counts against your query rate limit and is logged for audit."
        ),
    )
    async def search(
        query: Query,
        collection: CollectionName = None,
        k: Annotated[
            int | None,
            Field(
                ge=1,
                le=tools.MAX_K,
                description=(f"How many passages to return, 1 to {tools.MAX_K} (default: the server's top_k)."),
            ),
        ] = None,
    ) -> dict[str, Any]:
        return await call_tool(tools.search, query=query, collection=collection, k=k)

    @server.tool(
        name="ask",
        annotations=QUERY,
        description=(
            "Answer `question` only from the indexed documents. Returns `answer_class` (normal, low_confidence or "
            "no_evidence), the verified `answer` and its `citations` (source, heading, page, lines, text); or, when "
            "the documents do not hold the answer, the refusal (`answer_class` no_evidence) and its reason "
            "(`refusal`: gate, relevance, grounding or model). Treat a refusal as 'not in the documents'. "
            "Counts against your query rate limit and is logged for audit."
        ),
    )
    async def ask(question: Question, collection: CollectionName = None) -> dict[str, Any]:
        return await call_tool(tools.ask, question=question, collection=collection)

    @server.tool(
        name="get_chunk",
        annotations=READ_ONLY,
        description=(
            "Read one passage by its `chunk_id` (from search, ask citations or a source resource): its text and "
            "location (source, heading, page, lines), and with `neighbours` > 0 that many passages before and after "
            "it in the same document."
        ),
    )
    async def get_chunk(
        chunk_id: Annotated[int, Field(description="The passage's chunk_id.")],
        neighbours: Annotated[
            int,
            Field(
                ge=0,
                le=tools.MAX_NEIGHBOURS,
                description=(f"Passages to add on each side, 0 to {tools.MAX_NEIGHBOURS}."),
            ),
        ] = 0,
    ) -> dict[str, Any]:
        return await call_tool(tools.get_chunk, chunk_id=chunk_id, neighbours=neighbours)

    @server.tool(
        name="list_collections",
        annotations=READ_ONLY,
        description=(
            "The collections of documents you can read, with their descriptions and how many sources each holds."
        ),
    )
    async def list_collections() -> dict[str, Any]:
        return await call_tool(tools.list_collections)

    @server.tool(
        name="list_sources",
        annotations=READ_ONLY,
        description=(
            "The documents you can read (in `collection`, if given): id, name, title, kind, status, chunk count "
            "and the resource URI (foundry://source/{id}) that holds all its passages. "
            f"At most {tools.MAX_SOURCES_LISTED}."
        ),
    )
    async def list_sources(collection: CollectionName = None) -> dict[str, Any]:
        return await call_tool(tools.list_sources, collection=collection)


def _add_resources(server: FoundryMCP) -> None:
    @server.resource(
        "foundry://source/{source_id}",
        name="source",
        mime_type="application/json",
        description=(
            "One indexed document: its name, title and collection, and every passage (chunk) in order with its "
            "text and location (heading, page, lines)."
        ),
    )
    async def source(source_id: str) -> str:
        try:
            return json.dumps(await run_as_user(tools.read_source, source_id=source_id), ensure_ascii=False)
        except tools.ToolInputError as exc:
            raise ResourceNotFoundError(str(exc)) from None
