"""Answering questions from the sources only; the public names of the package.

``answer`` (what an answer is) ← ``compose`` (from retrieved passages to an answer) and ``record``
(its query-log row, and answers served again from the log) ← ``answering`` (one question, start to end).
"""

from generation.answers.answer import (
    LOW_CONFIDENCE_PREFIX,
    MAX_QUESTION_CHARS,
    Answer,
    Progress,
    QueryError,
    QueryFailed,
    Sentences,
    answer_pieces,
    question_clean,
)
from generation.answers.answering import answer_logged, answer_question
from generation.answers.record import Asked, querylog_row

__all__ = [
    "LOW_CONFIDENCE_PREFIX",
    "MAX_QUESTION_CHARS",
    "Answer",
    "Asked",
    "Progress",
    "QueryError",
    "QueryFailed",
    "Sentences",
    "answer_logged",
    "answer_pieces",
    "answer_question",
    "question_clean",
    "querylog_row",
]
