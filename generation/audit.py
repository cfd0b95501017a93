"""Run records outside the database: runs.csv and artifacts/<date>/<run_id>/retrieval.json."""

from __future__ import annotations

import csv
import io
import json
import os
from typing import Any

from django.conf import settings
from django.utils import timezone

RUNS_COLUMNS = [
    "run_id",
    "timestamp",
    "task_name",
    "status",
    "answer_class",
    "llm_calls",
    "latency_ms",
    "model",
    "user",
]


def artifacts_write(*, run_id: str, question: str, retrieval: Any, answer: dict) -> str:
    """Write retrieval.json for the run; returns its path."""
    folder = settings.FOUNDRY_ARTIFACTS / timezone.now().strftime("%Y-%m-%d") / run_id
    folder.mkdir(parents=True, exist_ok=True)
    payload = {
        "run_id": run_id,
        "question": question,
        "mode": retrieval.mode,
        "hyde_text": retrieval.hyde_text,
        "channels": retrieval.channels_dict(),
        "gate": retrieval.gate.as_dict() if retrieval.gate else None,
        "candidates": [c.as_dict() for c in retrieval.candidates],
        "conflicts": [c.as_dict() for c in retrieval.conflicts],  # all found; the answer shows those about it
        "answer_class": answer["answer_class"],
        "citations": [c["chunk_id"] for c in answer["citations"]],
        "timings_ms": answer["timings"],
        "grounding": answer["grounding"],
    }
    path = folder / "retrieval.json"
    path.write_text(json.dumps(payload, indent=2, ensure_ascii=False), encoding="utf-8")
    return str(path)


def runs_append(
    *,
    run_id: str,
    task_name: str,
    status: str,
    answer_class: str,
    llm_calls: int,
    latency_ms: float,
    model: str,
    user: Any,
) -> None:
    """Append one line to runs.csv. One write() of one line on an O_APPEND file, so
    concurrent server processes never interleave lines."""
    path = settings.FOUNDRY_HOME / "runs.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    if not path.exists():
        writer.writerow(RUNS_COLUMNS)
    writer.writerow(
        [
            run_id,
            timezone.now().isoformat(),
            task_name,
            status,
            answer_class,
            llm_calls,
            latency_ms,
            model,
            getattr(user, "username", ""),
        ]
    )
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, buffer.getvalue().encode("utf-8"))
    finally:
        os.close(fd)
