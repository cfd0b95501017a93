"""Dutch and German questions against the users' own specifications, per embedding model: does the
gate pass them, does the answer's chunk rank first, does the extractive answer quote it; and are
questions the files do not answer refused.

    FOUNDRY_CONFIG=<a foundry.yaml> /work/main/.venv/bin/python bench/multilingual_probe.py \
        [--seeds /work/shared/seeds] [--json out.json]

The files are 000 and 002 (Dutch) and 004 (German) of ``--seeds``, ingested into a throw-away
FOUNDRY_HOME with the configured embedding model (its thresholds: foundry.yaml, else the model's
row of ``embedding_thresholds.json``). Each question names a phrase its answer line holds; a
question was written from the text, not tuned on any model.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

os.environ.update(FOUNDRY_HOME=tempfile.mkdtemp(prefix="foundry-mlprobe-"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common  # noqa: E402  (Django set-up)
from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402

from generation.answers import answer_question  # noqa: E402
from retrieval.services.retrieve import retrieve  # noqa: E402
from sources import vectorstore  # noqa: E402
from sources.models import Chunk  # noqa: E402
from sources.services.ingest_jobs import knowledge_base_ingest  # noqa: E402
from tests.conftest import config_with  # noqa: E402

FILES = ("000_", "002_", "004_")
# (language, question, a phrase of the answer line; None: the files do not answer it)
QUESTIONS = [
    ("nl", "Hoeveel pogingen doet de retry bij een mislukte LLM-aanroep?", "3 pogingen"),
    ("nl", "Welke vector store gebruikt Foundry?", "sqlite-vec"),
    ("nl", "Wat vraagt foundry generate als het uitvoerbestand al bestaat?", "Overwrite"),
    ("nl", "Hoeveel bronsamenvattingen komen maximaal in de systeemprompt?", "max_source_summaries"),
    ("nl", "Welke branches zijn beschermd?", "main en develop"),
    ("nl", "Hoeveel LLM-hops per document had de claim extractie pipeline?", "4 LLM-hops"),
    ("de", "Welcher Relevanz-Schwellenwert filtert die Chunks?", "Score > 0.7"),
    ("de", "Wie viele Chunks liefert die semantische Suche?", "Top-K=5"),
    ("de", "Wie schnell muss die Antwort-Generierung im P95 sein?", "5 Sekunden"),
    ("de", "Welche Meldung erscheint, wenn keine relevanten Chunks gefunden werden?", "Keine passende Antwort"),
    ("de", "Wie groß darf der Prompt höchstens sein?", "8K Tokens"),
    ("nl", "Wat is de hoofdstad van Australië?", None),
    ("nl", "Hoe lang moet je een ei koken?", None),
    ("de", "Wie hoch ist der Eiffelturm?", None),
    ("de", "Wer hat die Relativitätstheorie entwickelt?", None),
]


def ask(language: str, question: str, phrase: str | None) -> dict:
    found = retrieve(question=question, collection_ids=None)
    ranked = [c.chunk.text for c in found.ranked]
    rank = next((i for i, text in enumerate(ranked, start=1) if phrase and phrase in text), None)
    answer = answer_question(question=question)
    quoted = bool(phrase) and not answer.refusal and phrase in answer.answer
    return {
        "language": language,
        "question": question,
        "phrase": phrase,
        "gate_passed": found.gate.passed,
        "best_score": round(max((c.score for c in found.ranked), default=0.0), 3),
        "answer_chunk_rank": rank,
        "refused": answer.refusal or None,
        "answer_quotes_phrase": quoted,
    }


def summary(rows: list[dict]) -> dict:
    out = {}
    for language in ("nl", "de"):
        asked = [r for r in rows if r["language"] == language and r["phrase"]]
        absent = [r for r in rows if r["language"] == language and not r["phrase"]]
        out[language] = {
            "answerable": len(asked),
            "gate_passed": sum(r["gate_passed"] for r in asked),
            "answer_chunk_first": sum(r["answer_chunk_rank"] == 1 for r in asked),
            "answer_quotes_phrase": sum(r["answer_quotes_phrase"] for r in asked),
            "not_in_files": len(absent),
            "not_in_files_refused": sum(bool(r["refused"]) for r in absent),
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=Path, default=Path("/work/shared/seeds"))
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    settings.FOUNDRY = config_with(
        settings.FOUNDRY, ingest={"summary_model": "none"}, generation={"model": "extractive", "cache_answers": False}
    )
    folder = Path(tempfile.mkdtemp(prefix="foundry-mlseeds-"))
    for path in sorted(args.seeds.iterdir()):
        if path.name.startswith(FILES):
            shutil.copy(path, folder / (path.stem + ".md"))  # the specifications are Markdown
    call_command("migrate", verbosity=0)
    start = time.perf_counter()
    knowledge_base_ingest(target=folder)
    ingest_s = time.perf_counter() - start
    model = settings.FOUNDRY.embedding.model
    vectors = vectorstore.vector_count(model) + vectorstore.window_count(model)
    rows = [ask(*q) for q in QUESTIONS]
    for r in rows:
        print(json.dumps(r, ensure_ascii=False), flush=True)
    conf = settings.FOUNDRY
    result = {
        "command": "bench/multilingual_probe.py",
        "date": time.strftime("%Y-%m-%d"),
        "machine": _common.machine_line(),
        "embedding_model": conf.embedding.model,
        "thresholds": {
            "retrieval.min_score": conf.retrieval.min_score,
            "generation.reader_min_score": conf.generation.reader_min_score,
        },
        "ingest_s": round(ingest_s, 1),
        "chunks": Chunk.objects.count(),
        "vectors": vectors,
        "ingest_chunks_per_s": round(Chunk.objects.count() / ingest_s, 2),
        "summary": summary(rows),
        "questions": rows,
    }
    print(json.dumps(result["summary"]))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
