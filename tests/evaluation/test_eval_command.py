"""``foundry eval retrieval`` and ``foundry eval answers`` end to end on tiny data built here."""

from __future__ import annotations

import csv
import io
import json
import sqlite3
from pathlib import Path

import pytest
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.core.management.base import CommandError

from sources.models import Source
from tests.conftest import ScriptedLLM

pytestmark = pytest.mark.django_db(transaction=True)

DOCS = {
    "volcano": (
        "Volcanoes",
        "Magma rises through the crust and erupts as lava from a volcano. Basalt lava flows are hot and fluid.",
    ),
    "chess": (
        "Chess openings",
        "The Sicilian Defence answers the king's pawn opening in chess. A rook moves along ranks and files.",
    ),
    "photo": (
        "Photosynthesis",
        "Plants turn sunlight, water and carbon dioxide into sugar and oxygen in their chloroplasts.",
    ),
    "bread": (
        "Sourdough bread",
        "Sourdough is leavened by wild yeast and lactic acid bacteria kept in a starter of flour and water.",
    ),
}
QUERIES = {
    "q1": "How does lava erupt from a volcano?",
    "q2": "Which chess opening answers the king's pawn?",
    "q3": "How do plants make oxygen from sunlight?",
}
QRELS = [("q1", "volcano", 1), ("q2", "chess", 2), ("q3", "photo", 1), ("q3", "bread", 0)]


@pytest.fixture
def beir(tmp_path: Path) -> dict[str, Path]:
    folder = tmp_path / "beir"
    folder.mkdir()
    (folder / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": k, "title": t, "text": x}) + "\n" for k, (t, x) in DOCS.items())
    )
    (folder / "queries.jsonl").write_text("".join(json.dumps({"_id": k, "text": v}) + "\n" for k, v in QUERIES.items()))
    (folder / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t{s}\n" for q, d, s in QRELS))
    return {
        name: folder / f"{name}.{ext}" for name, ext in (("corpus", "jsonl"), ("queries", "jsonl"), ("qrels", "tsv"))
    }


def run_eval(*args: str) -> dict:
    out = io.StringIO()
    call_command("foundry", "eval", *args, "--json", stdout=out)
    return json.loads(out.getvalue())


def test_eval_retrieval_reports_every_mode_and_reuses_its_index(beir: dict[str, Path]) -> None:
    args = [
        "retrieval",
        "--corpus",
        str(beir["corpus"]),
        "--queries",
        str(beir["queries"]),
        "--qrels",
        str(beir["qrels"]),
    ]
    first = run_eval(*args)
    assert first["queries"] == 3 and set(first["modes"]) == {"bm25", "dense", "hybrid"}
    for values in first["modes"].values():
        assert set(values) >= {"ndcg@10", "recall@10", "recall@100", "mrr@10", "p50_ms", "p95_ms"}
        assert values["ndcg@10"] > 0.9 and values["recall@10"] == 1.0  # one obvious document per query
        low, high = values["ndcg@10_ci95"]
        assert low <= values["ndcg@10"] <= high <= 1.0
    assert set(first["differences"]) == {"dense - bm25", "hybrid - bm25", "hybrid - dense"}
    for gap in first["differences"].values():
        assert gap["ci95"][0] <= gap["ndcg@10"] <= gap["ci95"][1]
    report = Path(first["report"])
    assert {p.name for p in report.iterdir()} >= {"report.md", "report.json", "modes.png", "latency.png"}
    markdown = (report / "report.md").read_text()
    assert "| hybrid |" in markdown and "| hybrid - bm25 |" in markdown
    payload = json.loads((report / "report.json").read_text())
    assert payload["index"]["ingested"] == 4
    assert payload["config"]["top_k"] == 100  # the eval's depth, not the configured top_k
    assert {
        "bm25_max_df",
        "bm25_max_postings",
        "dense_shortlist",
        "dense_exact_max_rows",
        "min_score",
        "chunk_overlap_tokens",
        "context_model",
    } <= set(payload["config"])
    assert not Source.objects.exists()  # the eval index is its own database, not the knowledge base

    second = run_eval(*args, "--modes", "bm25")
    assert set(second["modes"]) == {"bm25"}
    index = json.loads((Path(second["report"]) / "report.json").read_text())["index"]
    assert index["ingested"] == 0 and index["unchanged"] == 4  # nothing embedded again
    rows = list(csv.DictReader((Path(settings.FOUNDRY_HOME) / "eval.csv").open()))
    assert [r["kind"] for r in rows] == ["retrieval", "retrieval"] and rows[1]["modes"] == "bm25"


def index_rows(database: str, query: str) -> tuple:
    """``query``'s one row in an eval index: a SQLite file, or a database on the PostgreSQL server under test."""
    from django.db import connection

    if connection.vendor == "sqlite":
        with sqlite3.connect(database) as db:
            return tuple(db.execute(query).fetchone())
    import psycopg

    conn = connection.settings_dict
    with psycopg.connect(dbname=database, user=conn["USER"], host=conn["HOST"], port=conn["PORT"] or None) as db:
        return tuple(int(v) for v in db.execute(query).fetchone())


def test_eval_index_embeds_contextual_prefixes_under_their_own_key(
    beir: dict[str, Path], foundry_config, scripted_llm: ScriptedLLM
) -> None:
    """Prefixes change what is embedded, so an eval of ``embedding.context_model`` builds its own index."""
    args = [
        "retrieval",
        "--corpus",
        str(beir["corpus"]),
        "--queries",
        str(beir["queries"]),
        "--qrels",
        str(beir["qrels"]),
        "--modes",
        "dense",
    ]
    plain = run_eval(*args)
    foundry_config(embedding={"context_model": "scripted/ctx"})
    scripted_llm.reply = lambda messages: "This passage is from a field guide."
    prefixed = run_eval(*args)
    plain_index = json.loads((Path(plain["report"]) / "report.json").read_text())["index"]
    prefixed_index = json.loads((Path(prefixed["report"]) / "report.json").read_text())["index"]
    assert plain_index["ingested"] == 4 and prefixed_index["ingested"] == 4  # not the cached plain index
    assert len(scripted_llm.calls) == 4  # one prefix per chunk, no summaries
    assert prefixed_index["database"] != plain_index["database"]
    query = "SELECT count(*), sum(CASE WHEN context LIKE '%from a field guide.' THEN 1 ELSE 0 END) FROM sources_chunk"
    assert index_rows(prefixed_index["database"], query) == (4, 4)
    assert index_rows(plain_index["database"], query) == (4, 0)
    run_eval(*args)
    assert len(scripted_llm.calls) == 4  # the prefixed index is reused as well


def test_eval_retrieval_rejects_bad_input(beir: dict[str, Path]) -> None:
    beir["qrels"].write_text("q1\tvolcano\t1\nq2\tchess\n")
    with pytest.raises(CommandError, match=r"qrels.tsv:2: expected 3 tab-separated columns"):
        run_eval(
            "retrieval",
            "--corpus",
            str(beir["corpus"]),
            "--queries",
            str(beir["queries"]),
            "--qrels",
            str(beir["qrels"]),
        )
    with pytest.raises(CommandError, match="unknown mode"):
        run_eval(
            "retrieval",
            "--corpus",
            str(beir["corpus"]),
            "--queries",
            str(beir["queries"]),
            "--qrels",
            str(beir["qrels"]),
            "--modes",
            "bm25,magic",
        )
    taken = beir["qrels"].parent / "report.txt"
    taken.write_text("not a folder")
    with pytest.raises(CommandError, match=r"--report: .*report.txt is a file; give a folder"):
        run_eval(
            "retrieval",
            "--corpus",
            str(beir["corpus"]),
            "--queries",
            str(beir["queries"]),
            "--qrels",
            str(beir["qrels"]),
            "--report",
            str(taken),
        )
    assert not Source.objects.exists()  # refused before the eval index was built


def squad_article(title: str, context: str, answerable: list[tuple[str, str]], impossible: list[str]) -> dict:
    qas = [
        {
            "id": f"{title}-a{i}",
            "question": q,
            "is_impossible": False,
            "answers": [{"text": a, "answer_start": context.find(a)}],
        }
        for i, (q, a) in enumerate(answerable)
    ]
    qas += [
        {"id": f"{title}-n{i}", "question": q, "is_impossible": True, "answers": []} for i, q in enumerate(impossible)
    ]
    return {"title": title, "paragraphs": [{"context": context, "qas": qas}]}


SQUAD = {
    "version": "v2.0",
    "data": [
        squad_article(
            "Volcano",
            "Basalt lava erupts from shield volcanoes at about 1,200 degrees Celsius. "
            "Shield volcanoes such as Mauna Loa have gentle slopes.",
            [("How hot is basalt lava when it erupts from shield volcanoes?", "1,200 degrees Celsius")],
            ["How hot is the basalt lava of Mars volcanoes?"],
        ),
        squad_article(
            "Chess",
            "The Sicilian Defence is a chess opening that answers the king's pawn move. "
            "It begins with the moves e4 c5.",
            [("Which chess opening answers the king's pawn move?", "Sicilian Defence")],
            ["Which chess opening answers the queen's rook move?"],
        ),
        squad_article(
            "Sourdough",
            "Sourdough bread is leavened by wild yeast kept in a flour starter.",
            [("What leavens sourdough bread?", "wild yeast")],
            [],
        ),
    ],
}


def echo_first_passage(messages: list[dict]) -> str:
    """Answer with the first sentence of passage S1, cited: always grounded."""
    context = messages[0]["content"]
    body = context.split("[S1]", 1)[1].split("\n", 2)[2] if "[S1]" in context else ""
    sentence = body.strip().split(". ")[0].rstrip(".")
    return f"{sentence} [S1]." if sentence else "The indexed documentation does not contain this information."


def test_eval_answers_writes_official_predictions(tmp_path: Path, foundry_config, scripted_llm: ScriptedLLM) -> None:
    foundry_config(retrieval={"min_chunks": 1, "min_score": 0.3})
    scripted_llm.reply = echo_first_passage
    squad = tmp_path / "squad.json"
    squad.write_text(json.dumps(SQUAD))
    summary = run_eval("answers", "--squad", str(squad), "--kb-articles", "2", "--limit", "6", "--seed", "1")
    report = Path(summary["report"])
    predictions = json.loads((report / "predictions.json").read_text())
    payload = json.loads((report / "report.json").read_text())
    asked = payload["outcomes"]
    assert payload["index"]["chunks"] >= 2 and payload["index"]["ingested"] == 2
    assert len(predictions) == len(asked) == summary["questions"] and summary["questions"] >= 4
    assert all(isinstance(v, str) for v in predictions.values())
    kinds = {o["kind"] for o in asked}
    assert kinds == {"answerable", "impossible", "out_of_corpus"}
    for outcome in asked:
        assert (predictions[outcome["qid"]] == "") == (outcome["answer_class"] == "no_evidence")
        if outcome["kind"] == "out_of_corpus" and outcome["refusal"] == "gate":
            assert outcome["llm_calls"] == 0
    dataset = json.loads((report / "dataset.json").read_text())
    qas = [qa for article in dataset["data"] for p in article["paragraphs"] for qa in p["qas"]]
    assert sorted(qa["id"] for qa in qas) == sorted(predictions)
    assert all(qa["is_impossible"] == (qa["answers"] == []) for qa in qas)
    for key in (
        "exact",
        "f1",
        "HasAns_f1",
        "NoAns_f1",
        "refusal_rate_out_of_corpus",
        "false_refusal_rate",
        "hallucination_rate",
        "citation_precision",
        "attribution_coverage",
        "latency_ms",
    ):
        assert key in summary
    assert set(summary["ci95"]) == {
        "f1",
        "HasAns_f1",
        "refusal_rate_out_of_corpus",
        "false_refusal_rate",
        "hallucination_rate",
        "citation_precision",
        "HasAns_holds_gold",
    }
    for key, interval in summary["ci95"].items():  # each on its number's own scale (F1 0-100, rates 0-1)
        if interval is not None:
            assert interval[0] - 0.01 <= summary[key] <= interval[1] + 0.01, key
    assert "false-refusal rate (answerable) | " in (markdown := (report / "report.md").read_text())
    assert "(95 %: " in markdown.split("false-refusal rate")[1].splitlines()[0]
    assert {"answers.png", "latency.png", "report.md"} <= {p.name for p in report.iterdir()}
    rows = list(csv.DictReader((Path(settings.FOUNDRY_HOME) / "eval.csv").open()))
    assert rows[-1]["kind"] == "answers"
    assert not (Path(settings.FOUNDRY_HOME) / "runs.csv").exists()  # per-question rows stay with the eval index


def test_eval_answers_compares_readers_on_the_same_questions(
    tmp_path: Path, foundry_config, scripted_llm: ScriptedLLM
) -> None:
    foundry_config(
        retrieval={"min_chunks": 1, "min_score": 0.3}, generation={"reader_min_score": 0.0, "reader_low_score": 0.0}
    )
    scripted_llm.reply = echo_first_passage
    squad = tmp_path / "squad.json"
    squad.write_text(json.dumps(SQUAD))
    out = io.StringIO()
    call_command(
        "foundry",
        "eval",
        "answers",
        "--squad",
        str(squad),
        "--kb-articles",
        "2",
        "--limit",
        "6",
        "--seed",
        "1",
        "--reader",
        "extractive,scripted/generator",
        "--report",
        str(tmp_path / "r"),
        stdout=out,
    )
    table = out.getvalue().split("| reader |")[1]
    rows = {line.split("|")[1].strip(): line for line in table.splitlines() if line.startswith("| ")}
    assert set(rows) == {"extractive", "scripted/generator"}
    extractive = json.loads((tmp_path / "r" / "extractive" / "report.json").read_text())
    scripted = json.loads((tmp_path / "r" / "scripted_generator" / "report.json").read_text())
    assert extractive["config"]["generation.model"] == "extractive" and extractive["llm_calls"] == 0
    assert scripted["llm_calls"] > 0
    assert [o["qid"] for o in extractive["outcomes"]] == [o["qid"] for o in scripted["outcomes"]]
    for outcome in extractive["outcomes"]:
        if outcome["kind"] == "answerable" and outcome["prediction"]:
            golds = [g.lower() for g in outcome["golds"]]
            assert outcome["holds_gold"] == any(g in outcome["prediction"].lower() for g in golds)


def test_eval_answers_refuses_an_unknown_reader(tmp_path: Path) -> None:
    squad = tmp_path / "squad.json"
    squad.write_text(json.dumps(SQUAD))
    with pytest.raises(ImproperlyConfigured, match="--reader 'bogus'"):
        run_eval("answers", "--squad", str(squad), "--kb-articles", "1", "--reader", "bogus")


def test_eval_answers_needs_an_article_outside_the_corpus(tmp_path: Path) -> None:
    squad = tmp_path / "squad.json"
    squad.write_text(json.dumps(SQUAD))
    with pytest.raises(CommandError, match="--kb-articles must be between 1 and 2"):
        run_eval("answers", "--squad", str(squad), "--kb-articles", "3")
