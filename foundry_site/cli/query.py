"""``foundry query``: ask the knowledge base."""

from __future__ import annotations

import argparse
from typing import TextIO

from django.core.management.base import CommandError

from foundry_site.cli.display import safe_json
from foundry_site.cli.render import answer_format
from generation.answers import QueryError, QueryFailed, answer_question
from sources.models import Collection
from sources.vectorstore import EmbeddingModelChanged, MissingEmbeddings


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("query", help="answer a question from the indexed sources, with citations")
    p.add_argument("question")
    p.add_argument("--mode", choices=["hybrid", "dense", "bm25"], default=None)
    p.add_argument("--top-k", type=int, default=None)
    p.add_argument("--collection", action="append", default=None, help="limit to these collections (repeatable)")
    p.add_argument("--snippets", action="store_true", help="show up to 3 verbatim lines per source")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(handler=query_command)


def collection_ids(names: list[str] | None) -> list[int] | None:
    if not names:
        return None
    found = dict(Collection.objects.filter(name__in=names).values_list("name", "pk"))
    missing = sorted(set(names) - set(found))
    if missing:
        raise CommandError(f"unknown collection(s): {', '.join(missing)}")
    return list(found.values())


def query_command(opts: argparse.Namespace, out: TextIO) -> int:
    if opts.top_k is not None and not 1 <= opts.top_k <= 100:
        raise CommandError("--top-k must be between 1 and 100")
    try:
        answer = answer_question(
            question=opts.question, collection_ids=collection_ids(opts.collection), mode=opts.mode, top_k=opts.top_k
        )
    except EmbeddingModelChanged as exc:  # the CLI is the administrator's: show the commands
        raise CommandError(f"{exc.problem}\n{exc.fix}") from None
    except (QueryError, MissingEmbeddings) as exc:
        raise CommandError(str(exc)) from None
    except QueryFailed as exc:
        raise CommandError(f"{exc} (logged as run {exc.run_id})") from None
    if opts.json:
        out.write(safe_json(answer.as_dict()) + "\n")
    else:
        out.write(answer_format(answer, snippets=opts.snippets))
    return 0
