"""``foundry generate``: a cited Markdown document from an approved feature spec."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TextIO

from django.conf import settings
from django.core.management.base import CommandError

from foundry_site.cli.display import output_file_check, safe, safe_json
from foundry_site.cli.query import collection_ids
from core.config import EXTRACTIVE
from generation import writer
from generation.documents import GenerationError, SpecText, document_prepare, topic_request
from generation.pipeline import generation_run_create
from generation.models import GenerationRun
from generation.tasks import generate_document
from foundry_site.cli.render import conflict_format
from specs.errors import SpecError
from specs.selectors import spec_for_generation


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("generate", help="write a cited Markdown document following an approved feature spec")
    p.add_argument("--topic", required=True, help="what the document is about (also the retrieval query)")
    p.add_argument("--output", help="path of the Markdown file to write (not needed with --dry-run)")
    p.add_argument("--feature", default=None, help="approved feature spec to follow (needed when several exist)")
    p.add_argument("--collection", action="append", default=None, help="limit sources to these collections")
    p.add_argument("--dry-run", action="store_true", help="show retrieval and the prompt; call no generation model")
    p.add_argument("--yes", action="store_true", help="overwrite the output file without asking")
    p.add_argument("--json", action="store_true", help="print the run as one JSON object")
    p.set_defaults(handler=generate_command)


def generate_command(opts: argparse.Namespace, out: TextIO) -> int:
    try:
        selected = spec_for_generation(opts.feature)
    except SpecError as exc:
        raise CommandError(str(exc)) from None
    spec = SpecText(selected.name, selected.version, selected.body)
    scope = collection_ids(opts.collection)
    if opts.dry_run:
        try:
            return _dry_run(opts.topic, spec, scope, out)
        except GenerationError as exc:
            raise CommandError(str(exc)) from None
    if not opts.output:
        raise CommandError("--output is required: the path of the Markdown file to write (or --dry-run)")
    output = Path(opts.output).expanduser().resolve()
    _confirm_overwrite(output, yes=opts.yes)
    try:
        run = generation_run_create(topic=opts.topic, spec=spec, output_path=str(output), collection_ids=scope)
    except GenerationError as exc:
        raise CommandError(str(exc)) from None
    generate_document.delay(run.pk)
    run = _wait(run.pk, quiet=opts.json)
    if opts.json:
        out.write(safe_json(run_summary(run)) + "\n")
        return 0 if run.wrote_document else 1
    for conflict in run.conflicts:
        out.write(conflict_format(conflict) + "\n\n")
    if not run.wrote_document:
        raise CommandError(f"Run {run.pk} failed: {(run.error or {}).get('message', 'unknown error')}")
    out.write(
        f"Wrote {output} (run {run.pk}, spec {spec.name} v{spec.version}, "
        f"{run.sentences_kept}/{run.sentences_total} sentences kept, coverage "
        f"{run.coverage:.0%}, {run.timings.get('total', 0) / 1000:.1f}s)\n"
    )
    if run.status == GenerationRun.Status.NEEDS_REVIEW:
        out.write(
            "NEEDS REVIEW — low confidence, limited source coverage: fewer sentences kept than "
            "generation.min_coverage asks (the document says so under its title).\n"
        )
    return 0


def _confirm_overwrite(output: Path, *, yes: bool) -> None:
    """Never overwrite silently: --yes, or a yes typed at a terminal; no terminal means no."""
    output_file_check(output, option="--output")
    if not output.exists() or yes:
        return
    if not sys.stdin.isatty():
        raise CommandError(f"File exists: {output.name}. Not overwriting without --yes (no terminal to ask).")
    sys.stderr.write(f"File exists: {output.name}\nOverwrite? [y/N]: ")
    sys.stderr.flush()
    if sys.stdin.readline().strip().lower() not in ("y", "yes"):
        raise CommandError("Not overwritten.")


def _wait(run_id: int, *, quiet: bool) -> GenerationRun:
    """Follow the run's stage until it ends (immediate when tasks run in-process)."""
    last = ""
    while True:
        run = GenerationRun.objects.get(pk=run_id)
        shown = run.status if run.status == GenerationRun.Status.FAILED else (run.stage or run.status)
        if shown != last and not quiet:
            sys.stderr.write(f"run {run_id}: {shown}\n")
            last = shown
        if run.is_finished:
            return run
        time.sleep(0.5)


def _dry_run(topic: str, spec: SpecText, scope: list[int] | None, out: TextIO) -> int:
    prepared = document_prepare(topic=topic, spec=spec, collection_ids=scope)
    r = prepared.retrieval
    out.write(f"Retrieval ({r.mode}): gate {'passed' if r.gate.passed else 'REFUSED'}: {r.gate.reason}\n")
    for c in r.candidates:
        ranks = ", ".join(f"{name} #{rank}" for name, rank in c.ranks.items())
        out.write(
            f"  [{c.label}] {safe(c.chunk.source.name)}, {safe(c.where)}  similarity {c.score:.2f}  "
            f"fused {c.fused:.4f}  ({ranks})\n"
        )
    for conflict in r.conflicts:
        out.write("\n" + conflict_format(conflict.as_dict()) + "\n")
    if settings.FOUNDRY.generation.model == EXTRACTIVE:
        _dry_run_outline(topic, spec, scope, out)
    elif prepared.system:
        out.write(f"\n--- system prompt ---\n{prepared.system}\n--- user ---\n{topic_request(topic)}\n")
    out.write("\n(dry run: no generation model was called)\n")
    return 0


def _dry_run_outline(topic: str, spec: SpecText, scope: list[int] | None, out: TextIO) -> None:
    """The extractive writer's plan: each section of the outline with the passages it would quote from."""
    sections, found = writer.sections_prepare(
        topic=topic, body=spec.body, collection_ids=scope, max_passages=settings.FOUNDRY.generation.max_passages
    )
    out.write("\n--- outline (extractive writer: quotes, no model) ---\n")
    for section in sections:
        out.write(f"## {safe(section['heading'])}: gate {'passed' if section['gate']['passed'] else 'REFUSED'}\n")
        for cid in section["chunks"]:
            out.write(f"  {safe(found[cid].chunk.source.name)}, {safe(found[cid].where)}\n")


def run_summary(run: GenerationRun) -> dict:
    return {
        "run_id": run.pk,
        "status": run.status,
        "topic": run.topic,
        "spec": run.spec_name,
        "spec_version": run.spec_version,
        "output": run.output_path,
        "coverage": run.coverage,
        "low_confidence": run.low_confidence,
        "sentences_total": run.sentences_total,
        "sentences_kept": run.sentences_kept,
        "conflicts": run.conflicts,
        "llm_calls": run.llm_calls,
        "timings": run.timings,
        "error": run.error,
    }
