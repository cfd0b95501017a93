"""BEIR and SQuAD loaders: good files load, bad ones fail naming the file and the line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from foundry_site.evaluation.beir import EvalDataError, judged_queries, load_corpus, load_qrels, load_queries
from foundry_site.evaluation.squad import exact_match, f1_score, load_squad, normalize_answer


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_beir_files_load(tmp_path: Path) -> None:
    corpus = load_corpus(
        write(
            tmp_path / "c.jsonl",
            '{"_id": "d1", "title": "T", "text": "x"}\n\n{"_id": 7, "text": "y", "metadata": {}}\n',
        )
    )
    assert corpus["d1"].title == "T" and corpus["7"].title == "" and corpus["7"].text == "y"
    queries = load_queries(write(tmp_path / "q.jsonl", '{"_id": "q1", "text": "what?"}\n{"_id": "q2", "text": "x"}\n'))
    qrels = load_qrels(write(tmp_path / "r.tsv", "query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\t7\t0\nq2\t7\t2\n"))
    assert qrels == {"q1": {"d1": 1, "7": 0}, "q2": {"7": 2}}
    assert judged_queries(queries, qrels, corpus, qrels_path=tmp_path / "r.tsv") == {"q1": "what?", "q2": "x"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '{"_id": "d1", "text": "x"}\n{"_id": "d2", "text": \n',
            r"c.jsonl:2: not valid JSON \(Expecting value at column 23\)",
        ),
        ('{"_id": "d1", "text": "a\tb"}\n', r"c.jsonl:1: not valid JSON \(Invalid control character at column 25\)"),
        ('{"_id": "d1", "text": "x"}\n\n{"_id": "d2"}\n', "c.jsonl:3: field 'text' is missing"),
        ('{"_id": "d1", "text": 5}\n', "c.jsonl:1: field 'text' is a int, expected a string"),
        ('{"_id": "d1", "text": "x"}\n{"_id": "d1", "text": "y"}\n', "c.jsonl:2: duplicate _id 'd1'"),
        ('["d1", "x"]\n', "c.jsonl:1: expected a JSON object"),
        ("", "c.jsonl: no documents"),
    ],
)
def test_corpus_errors_name_file_and_line(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(EvalDataError, match=message):
        load_corpus(write(tmp_path / "c.jsonl", text))


def test_queries_and_missing_file_errors(tmp_path: Path) -> None:
    with pytest.raises(EvalDataError, match="q.jsonl:2: query 'q2' has empty text"):
        load_queries(write(tmp_path / "q.jsonl", '{"_id": "q1", "text": "a"}\n{"_id": "q2", "text": "  "}\n'))
    with pytest.raises(EvalDataError, match="nope.jsonl: no such file"):
        load_queries(tmp_path / "nope.jsonl")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("query-id\tcorpus-id\tscore\nq1 d1 1\n", r"r.tsv:2: expected 3 tab-separated columns .* found 1"),
        ("q1\td1\tyes\n", "r.tsv:1: score 'yes' is not an integer"),
        ("q1\td1\t1\nq2\td2\thigh\n", "r.tsv:2: score 'high' is not an integer"),
        ("query-id\tcorpus-id\tscore\n", "r.tsv: no judgments"),
    ],
)
def test_qrels_errors_name_file_and_line(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(EvalDataError, match=message):
        load_qrels(write(tmp_path / "r.tsv", text))


def test_qrels_naming_unknown_document_or_query_is_an_error_naming_the_line(tmp_path: Path) -> None:
    corpus = load_corpus(write(tmp_path / "c.jsonl", '{"_id": "d1", "text": "x"}\n'))
    path = write(tmp_path / "r.tsv", "query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td9\t1\nq2\td1\t1\n")
    qrels = load_qrels(path)
    with pytest.raises(EvalDataError, match=r"r.tsv:3: query 'q1' judges document 'd9', which is not in the corpus"):
        judged_queries({"q1": "x", "q2": "y"}, qrels, corpus, qrels_path=path)
    del qrels["q1"]["d9"]
    with pytest.raises(EvalDataError, match=r"r.tsv:4: query 'q2' is not in the queries file"):
        judged_queries({"q1": "x"}, qrels, corpus, qrels_path=path)


SQUAD = {
    "version": "v2.0",
    "data": [
        {
            "title": "Chess",
            "paragraphs": [
                {
                    "context": "Chess has 64 squares.",
                    "qas": [
                        {
                            "id": "a1",
                            "question": "How many squares?",
                            "is_impossible": False,
                            "answers": [{"text": "64", "answer_start": 10}],
                        },
                        {"id": "a2", "question": "How many kings are red?", "is_impossible": True, "answers": []},
                    ],
                }
            ],
        }
    ],
}


def test_squad_loads(tmp_path: Path) -> None:
    articles = load_squad(write(tmp_path / "s.json", json.dumps(SQUAD)))
    assert [a.title for a in articles] == ["Chess"] and articles[0].paragraphs == ["Chess has 64 squares."]
    first, second = articles[0].questions
    assert first.answers == ("64",) and not first.impossible and second.impossible and second.answers == ()


def test_squad_errors(tmp_path: Path) -> None:
    with pytest.raises(EvalDataError, match=r"s.json:2:\d+: not valid JSON"):
        load_squad(write(tmp_path / "s.json", '{"data": [\n  {"title": }\n]}'))
    broken = json.loads(json.dumps(SQUAD))
    del broken["data"][0]["paragraphs"][0]["qas"][1]["question"]
    with pytest.raises(EvalDataError, match=r"data\[0\]\.paragraphs\[0\]\.qas\[1\]: missing 'question'"):
        load_squad(write(tmp_path / "s.json", json.dumps(broken)))
    broken = json.loads(json.dumps(SQUAD))
    broken["data"][0]["paragraphs"][0]["qas"][0]["answers"] = []
    with pytest.raises(EvalDataError, match="answerable question without answers"):
        load_squad(write(tmp_path / "s.json", json.dumps(broken)))


def test_squad_scoring_follows_official_normalisation() -> None:
    assert normalize_answer("The  Eiffel-Tower!") == "eiffeltower"
    assert exact_match("the Eiffel Tower.", ["Eiffel Tower"]) == 1.0
    assert f1_score("in Paris France", ["Paris"]) == pytest.approx(0.5)
    assert exact_match("", []) == 1.0 and f1_score("", []) == 1.0
    assert exact_match("anything", []) == 0.0 and f1_score("anything", []) == 0.0
