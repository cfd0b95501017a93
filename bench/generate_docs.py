"""Generate documents with the configured (default: local) model on the sample knowledge base.

    .venv/bin/python bench/generate_docs.py

Throw-away FOUNDRY_HOME; one approved spec; five topics. Prints per topic the time, the share
of sentences the grounding check kept, and whether every footnote is defined, used and points
at a retrieved chunk.
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HOME = Path(tempfile.mkdtemp(prefix="foundry-gbench-"))
os.environ.update(FOUNDRY_HOME=str(HOME), DJANGO_SETTINGS_MODULE="foundry_site.settings")
sys.path.insert(0, str(ROOT))

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402

from generation.documents import SpecText  # noqa: E402
from generation.models import GenerationRun  # noqa: E402
from generation.pipeline import generation_run_create, generation_run_execute  # noqa: E402
from sources.services.ingest_jobs import knowledge_base_ingest  # noqa: E402
from tests.conftest import config_with  # noqa: E402

SPEC = SpecText(
    "product-note",
    1,
    "# Product note\n\nWrite a one-page technical note for installers: a title, "
    "two or three short sections, plain sentences, each backed by the sources.",
)
TOPICS = [
    "powering the AX-200 gateway",
    "connecting sensors to the RS-485 bus",
    "updating the firmware",
    "network configuration and default IP address",
    "alarm thresholds and sampling interval",
]


def footnotes_ok(text: str, run: GenerationRun) -> bool:
    """Every [^N] used is defined once, every definition is used, numbering is 1..n."""
    used = sorted({int(n) for n in re.findall(r"\[\^(\d+)\](?!:)", text)})
    defined = [int(n) for n in re.findall(r"^\[\^(\d+)\]:", text, re.MULTILINE)]
    return used == defined == list(range(1, len(defined) + 1)) and len(defined) <= len(run.chunks)


def main() -> dict:
    settings.FOUNDRY = config_with(settings.FOUNDRY, ingest={"summary_model": "none"})
    call_command("migrate", verbosity=0)
    knowledge_base_ingest(target=ROOT / "knowledge_base")
    rows = []
    for topic in TOPICS:
        out = HOME / f"{re.sub(r'[^a-z0-9]+', '-', topic)}.md"
        run = generation_run_create(topic=topic, spec=SPEC, output_path=str(out))
        start = time.perf_counter()
        generation_run_execute(run_id=run.pk)
        run.refresh_from_db()
        text = out.read_text() if out.exists() else ""
        rows.append(
            {
                "topic": topic,
                "status": run.status,
                "s": round(time.perf_counter() - start, 1),
                "kept": run.sentences_kept,
                "written": run.sentences_total,
                "coverage": run.coverage,
                "footnotes_ok": footnotes_ok(text, run) if text else None,
                "error": (run.error or {}).get("message", ""),
                "words": len(text.split()),
            }
        )
    return {
        "load_avg_1m": os.getloadavg()[0],
        "model": settings.FOUNDRY.generation.model,
        "rows": rows,
        "kept_share": round(sum(r["kept"] for r in rows) / max(1, sum(r["written"] for r in rows)), 3),
    }


if __name__ == "__main__":
    print(json.dumps(main(), indent=2))
