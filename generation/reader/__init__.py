"""The extractive reader: answers by quoting the passages' best units verbatim, with no LLM.

The passages that passed the retrieval gate are split into units (``core.units``):
sentences, list items and table rows. Each unit is scored against the question with the
embedding model already loaded (cosine of question and unit; a list item of several sentences by
its best sentence if that is closer), plus the share of the
question's content words (their stems) the unit holds, or its passage's heading path and document
title hold (a neighbour's words, the passage's fused rank and the share of the unit's words the
question lacks were measured too, and did not help: bench/reader_calibration.py). A code or name of
the question that no passage mentions (``unmentioned``) means the passages cannot answer it. The best
unit and up to ``reader_max_units - 1`` more that score nearly as well, or hold a question word the
units before them lack, or state the value a question asks ("what range …?", "the max?") when none before them
does, are quoted, grouped per passage in source order, each with its ``[S#]``; so is the
label line a quoted unit's paragraph opens with, when it (or the title and headings over it) names a question
word the unit lacks.

Whether the reading answers at all (the in-corpus "unanswerable" case the chunk gate cannot see) is
the answerability model's to judge (``generation.answerability``), from features of the reading. The
reader works on plain passage data, so the same code runs next to the database and on a compute worker.
"""

from generation.reader.choosing import read
from generation.reader.codes import unmentioned, version_order, versions
from generation.reader.followup import quoted_sentences, stored_quotes
from generation.reader.passages import Passage, Quote, Reading
from generation.reader.scoring import coverage, units_score
from generation.reader.words import reading, stems, unit_key

__all__ = [
    "Passage",
    "Quote",
    "Reading",
    "coverage",
    "quoted_sentences",
    "read",
    "reading",
    "stems",
    "stored_quotes",
    "unit_key",
    "units_score",
    "unmentioned",
    "version_order",
    "versions",
]
