"""Answers and conflicts as ``foundry query`` and ``foundry generate`` print them.

Document-derived text is escaped for the terminal: names, places, headings and quotes as one
line each (``safe``), the answer and snippet lines as running text (``safe_text``).
"""

from __future__ import annotations

from django.utils.translation import gettext

from foundry_site.cli.display import safe, safe_text
from generation.answers import LOW_CONFIDENCE_PREFIX, Answer
from generation.answers.language import answering_in
from generation.models import QueryLog
from retrieval.services.conflicts import ANSWER_HINT, HINT, date_note


def conflict_format(conflict: dict, *, hint: str = HINT) -> str:
    """The warning block for one ``Conflict.as_dict()``: names, places and quotes each on their line,
    control characters escaped (``safe``), so none can fake a line or drive the terminal; then ``hint``, what to do
    (of a document: the spec's source hierarchy; of an answer: ``ANSWER_HINT``)."""
    a, b = conflict["a"], conflict["b"]
    return (
        f"⚠ Conflict detected:\n"
        f'  Source A ({safe(a["source"])} {safe(a["where"])}{date_note(a, b)}): "{safe(a["quote"])}"\n'
        f'  Source B ({safe(b["source"])} {safe(b["where"])}{date_note(b, a)}): "{safe(b["quote"])}"\n'
        f"  {hint}"
    )


def answer_format(answer: Answer, *, snippets: bool = False) -> str:
    """Conflicts between sources first, then ``Answer:`` (or the low-confidence prefix) with the
    answer, then ``Sources:`` with one ``- [S1] file, location (score: 0.62)``
    line per citation, then the attribution coverage. A refusal prints its reason and hint."""
    lines = [conflict_format(c, hint=ANSWER_HINT) + "\n" for c in answer.conflicts]
    if answer.answer_class == QueryLog.AnswerClass.NO_EVIDENCE:
        lines.append(answer.answer)
        if answer.hint:
            lines.append(answer.hint)
        return "\n".join(lines) + "\n"
    header = "Answer:"
    if answer.answer_class == QueryLog.AnswerClass.LOW_CONFIDENCE:
        with answering_in(answer.question):  # the warning in the question's language, as its refusal would be
            header = gettext(LOW_CONFIDENCE_PREFIX)
    lines += [header, safe_text(answer.answer), "", "Sources:"]
    for c in answer.citations:
        lines.append(f"- [{c['id']}] {safe(c['source'])}, {safe(c['location'])} (score: {c['score']:.2f})")
        if snippets:
            lines += [f"    > {safe_text(line)}" for line in c["text"].splitlines()[:3]]
    if answer.coverage is not None:
        lines.append(f"\nAttribution coverage: {answer.coverage:.0%}")
    return "\n".join(lines) + "\n"
