"""Grounding a Markdown document the model wrote: every prose sentence and table row is checked against
the passages it was given, unsupported ones go, and markup the model wrote never reaches the document.
A document that lost most of what the model wrote says so under its title (``low_coverage_note``).
"""

from __future__ import annotations

import re

from core.grounding import Grounded, Grounder, Sentence, content_words, split_sentences
from retrieval.services.retrieve import Candidate

_LIST_PREFIX = re.compile(r"^(\s*(?:[-*+]|\d+[.)])\s+)")
MARKER = re.compile(r"\[(S\d+)\]")
# Markup the model writes although the sources are Markdown or text: script and style elements with
# their content, ``<<topic>>`` template placeholders, HTML comments, declarations (``<!DOCTYPE …>``,
# ``<?xml …?>``) and tags (``<p>``, ``</div>``, ``<br/>``).
_MARKUP = (
    re.compile(r"<(script|style)\b[^>]*>.*?(?:</\1\s*>|$)", re.IGNORECASE),
    re.compile(r"<<[^<>\n]*>>"),
    re.compile(r"<!--.*?(?:-->|$)"),
    re.compile(r"<[!?][^<>]*>"),
    re.compile(r"</?[A-Za-z][\w:.-]*(?:\s[^<>]*)?/?>"),
)
_HTML_START = re.compile(r"<(?=[A-Za-z/!?])")


def ground_markdown(
    text: str,
    included: list[Candidate] | dict[str, str],
    *,
    embedding_model: str | None = None,
    min_support: float | None = None,
) -> Grounded:
    """Ground every prose line and table row; headings and blank lines stay, unsupported sentences go.

    ``included``: the passages given to the model, or their texts by label.
    HTML tags, comments and ``<<…>>`` placeholders the model wrote are removed first (``_markup_strip``).
    As in answers (``grounding.ground``), a sentence or row the model repeats, anywhere in the document,
    is checked, kept and counted once, and a refusal phrase is neither kept nor counted; so is a fragment
    that states nothing (``_is_claim``), like a heading.
    Returns the markdown with [S#] markers as ``text``, the sentences written (``total``) and
    kept (``supported``), and each counted sentence's (or table row's) verdict for the audit.
    """
    grounder = Grounder(included, embedding_model=embedding_model, min_support=min_support)
    lines = [_markup_strip(line) for line in text.splitlines()]
    rows = _table_body_rows(lines)
    claims = {i: _claims(line) for i, line in enumerate(lines) if i not in rows and _is_prose(line)}
    grounder.prime([_as_written(s) for found in claims.values() for s in found])
    out: list[str | None] = []
    result = Grounded(text="")
    seen: set[str] = set()  # lower-cased sentences (and rows) already checked, as ``grounding.ground`` keeps
    for i, line in enumerate(lines):
        if i in rows:
            out.append(_ground_row(grounder, line, seen, result))
        elif i in claims:
            out.append(_ground_prose(grounder, line, claims[i], seen, result))
        elif line.strip("# \t") or not line.strip():  # a heading that was only markup goes
            out.append(line.rstrip())
    result.text = _drop_empty_sections([markup_escape(line) for line in out if line is not None])
    result.coverage = round(result.supported / result.total, 4) if result.total else None
    return result


def markup_escape(text: str) -> str:
    """``text`` with every ``<`` that could open a tag written ``&lt;``: source and model text never becomes
    raw HTML in a Markdown document, whatever renders it later."""
    return _HTML_START.sub("&lt;", text)


def _markup_strip(line: str) -> str:
    """``line`` without the markup the model wrote (``_MARKUP``); a line without any is returned as it is.

    The sources are Markdown or text, so markup states nothing; left in, a ``<p>`` at the start of a
    line opens a raw HTML block that runs to the end of the document, and the run page showed the
    Sources heading and the footnotes as one paragraph. What still looks like the start of a tag
    after this is escaped once the document is assembled (``ground_markdown``).
    """
    cleaned = line
    for pattern in _MARKUP:
        cleaned = pattern.sub(" ", cleaned)
    if cleaned == line:
        return line
    return line[: len(line) - len(line.lstrip())] + " ".join(cleaned.split())


def _is_claim(sentence: str) -> bool:
    """Whether a sentence (citation markers and markup removed) states something.

    One with no content word (what is left of a ``<<topic>>`` placeholder) or a bare label ending in
    ":" (``Feature release:``) does not: a passage may well share its words, but there is nothing it
    could support, so it is neither kept nor counted as a sentence written.
    """
    return bool(content_words(sentence)) and not sentence.endswith(":")


def _claims(line: str) -> list[Sentence]:
    """The sentences of a prose line (list marker left out) that state something."""
    prefix = _LIST_PREFIX.match(line)
    return [s for s in split_sentences(line[prefix.end() :] if prefix else line) if _is_claim(s.text)]


def _as_written(sentence: Sentence) -> str:
    """The sentence as ``grounding.ground`` reads it: its text, then the ids it cited."""
    return sentence.text + "".join(f"[{label}]" for label in sentence.cited)


def _ground_prose(
    grounder: Grounder, line: str, claims: list[Sentence], seen: set[str], result: Grounded
) -> str | None:
    """The line (with its list marker) holding the sentences a passage supports; None when none is left.

    Adds each sentence not seen before to ``result``'s counts and audit; a repeat is skipped.
    """
    kept: list[str] = []
    for sentence in claims:
        if sentence.text.lower() in seen:
            continue
        seen.add(sentence.text.lower())
        grounded = grounder.ground(_as_written(sentence))
        if grounded.refused:  # the refusal phrase: its text would be REFUSAL, not a sentence of the document
            continue
        result.total, result.supported = result.total + grounded.total, result.supported + grounded.supported
        result.sentences += grounded.sentences
        result.invalid_citations += grounded.invalid_citations
        if grounded.text:
            kept.append(grounded.text)
    prefix = _LIST_PREFIX.match(line)
    return (prefix.group(1) if prefix else "") + " ".join(kept) if kept else None


def _is_table_rule(line: str) -> bool:
    stripped = line.strip()
    return stripped.startswith("|") and "-" in stripped and set(stripped) <= set("|-: ")


def _table_body_rows(lines: list[str]) -> set[int]:
    """Indices of the rows under a table's header and |---| rule: they state facts like sentences do."""
    rows: set[int] = set()
    for i in range(1, len(lines)):
        if _is_table_rule(lines[i]) and lines[i - 1].lstrip().startswith("|"):
            j = i + 1
            while j < len(lines) and lines[j].lstrip().startswith("|") and not _is_table_rule(lines[j]):
                rows.add(j)
                j += 1
    return rows


def _ground_row(grounder: Grounder, line: str, seen: set[str], result: Grounded) -> str | None:
    """A table row stays only if its cells, read as one statement, are supported by a passage.

    Without this a model could put any value, or an injected "source", in a table and
    it would reach the document unchecked. Returns the row with its [S#] marker, or None when
    dropped; a row counts as one sentence in ``result``, a repeated row or one that states nothing
    (``_is_claim``) not at all.
    """
    cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
    claim = "; ".join(cell for cell in cells if MARKER.sub("", cell).strip())
    statement = MARKER.sub("", claim).strip()
    if not _is_claim(statement) or statement.lower() in seen:
        return None
    seen.add(statement.lower())
    grounded = grounder.ground(claim.replace(". ", "; "))  # one statement, not one sentence per cell
    cited = list(dict.fromkeys(c for s in grounded.sentences for c in s.cited))
    verdict = Sentence(statement, cited, support=min((s.support for s in grounded.sentences), default=0.0))
    result.total += 1
    result.sentences.append(verdict)
    if grounded.refused or not grounded.total or grounded.supported < grounded.total:
        return None
    verdict.supported_by = ", ".join(grounded.cited_ids)
    result.supported += 1
    cells = [MARKER.sub("", cell).strip() for cell in cells]
    cells[-1] = f"{cells[-1]} " + " ".join(f"[{label}]" for label in grounded.cited_ids)
    return "| " + " | ".join(cells) + " |"


def _is_prose(line: str) -> bool:
    stripped = line.strip()
    return bool(stripped) and not stripped.startswith(("#", "|", "```")) and not set(stripped) <= set("-*_=: ")


def _drop_empty_sections(lines: list[str]) -> str:
    """Remove headings left with no content before the next heading of the same or higher level."""
    keep: list[str] = []
    for i, line in enumerate(lines):
        if line.lstrip().startswith("#"):
            level = len(line.lstrip()) - len(line.lstrip().lstrip("#"))
            rest = [later for later in lines[i + 1 :] if later.strip()]
            nxt = rest[0].lstrip() if rest else ""
            nxt_level = len(nxt) - len(nxt.lstrip("#")) if nxt.startswith("#") else 0
            if not rest or (nxt_level and nxt_level <= level):
                continue
        keep.append(line)
    return re.sub(r"\n{3,}", "\n\n", "\n".join(keep)).strip()


def low_coverage_note(document: str, *, kept: int, total: int) -> str:
    """The document with a low-confidence note under its title: most of what the model wrote is not in it."""
    title, _, rest = document.lstrip().partition("\n")
    note = (
        f"> **Low confidence — limited source coverage:** {kept} of the {total} sentences the model wrote "
        "are supported by the sources and kept; the others were removed. Check the sources before relying "
        "on this document."
    )
    return f"{title}\n\n{note}\n{rest}"
