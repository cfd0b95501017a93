"""Turning a follow-up message into a standalone question, with no LLM (the offline default).

A conversation's later messages lean on earlier ones: "And its storage temperature?",
"How do I reset it?", "What about firmware 2.4?". Retrieval, the gate and grounding only ever
see one question, so a follow-up is rewritten before retrieval by a deterministic rule:

1. A message is a follow-up when it is short (at most ``SHORT_WORDS`` content words; not a whole question
   about a code it names, "What does E03 mean?", which names its subject as "When was 2.4.1 released?" does), starts
   with an elliptical lead ("and", "what about", "also" …), or holds a demonstrative ("that
   version", "those ports") or a third-person pronoun ("it", "its", "they", "them", "their" …) anywhere,
   unless the pronoun's antecedent is in the message itself: "that" after a noun or verb is a relative
   pronoun or a conjunction ("the version that fixed"; not with only a verb after it, "which port that uses", nor
   after a "+": "the gateway + that psu"), "it" in "what does it mean when …" announces
   the subject that follows, "it" in "what does the LED mean when it …" the subject before "mean", and a
   pronoun after a proper noun ("How did France manage its colonies?") refers to it. A message of at most
   ``WHOLE_WORDS`` content words that names nothing (no code, no name, no capitalised word after the first) is
   a follow-up too: "How long may the stubs be?", "what happens if no dhcp server answers" ask about what the
   conversation is about; "What wire size should be used for the power supply of the gateway?" says what it
   asks about. Anything else is taken as a new, standalone question (a
   topic switch) and passes through unchanged: a message that names its own subject carries nothing.
2. The antecedent is the earlier turn sharing the most content words with the message as typed (what
   a turn carried over is not its own), the latest one on a tie: a third question may go back to the
   first. A code counts as shared with any code of the same shape ("E06" with "E05"). With no
   shared word it is the previous turn. A turn named by its place is that turn: "how do I fix the
   second one?" after "What does E01 mean?", "And E02?" leans on the second.
3. The standalone question is the message followed by the subject terms of the antecedent (made
   standalone itself) that the message lacks
   (``subject_terms``: the words of its noun phrases, in their original spelling and order), e.g.
   "And the storage temperature? (PX-100)" after "What is the operating temperature range of the
   PX-100?". The verb of the thing asked about stays behind ("connected", "use" in "does the gateway use" or
   "does it use"; the asker's own is what they do, and is carried: "delay" in "Can I delay an alarm …?"), and so
   does the asked-for attribute of a named owner ("operating temperature range" of the PX-100; a phrase with a
   code names a thing, and stays: "terminal X4 of the PX-100"): a follow-up
   asks something else about the same thing, and the antecedent's attribute only pulls retrieval and
   the reader back to the first answer. A code in the message replaces the antecedent's codes of its
   shape: "And how do I fix E04?" after "What does error code E03 mean?" carries "error code", not "E03". A name
   ("RESET", "MQTT") is carried unless the message holds it spelt the same way: "factory reset" does
   not name the RESET button, and a new name need not replace one ("what about with TLS?" still asks
   about MQTT). The measure after "how" ("how long", "how heavy") or "how much" ("how much power"
   does the PX-100 consume: "what about its weight?" asks of the PX-100) and a turn's place ("the first
   one") ask; they are never carried. Nor is a plain word no source in the asker's collections holds
   ("boss", "remembers" in "Nobody on the team remembers …"): it finds no passage and is no topic of theirs, and
   the question shown tells nothing of the collections the asker cannot read. Codes and names are carried all the
   same: one that no passage mentions tells the reader that the passages cannot answer.
4. A message that only puts a code in place of the antecedent's one code of that shape asks the antecedent
   again: "And E04?" after "What does error code E03 mean?" is "What does error code E04 mean?", "and
   2.4.1?" after "When was firmware 2.3.0 released?" is "When was firmware 2.4.1 released?".

Measured by bench/followups.py on the follow-up sets of tests/data/ (each tuned on or not, as its docstring
says), on topic switches (each set's standalone questions asked after another conversation's first turn) and
on consecutive SQuAD questions about one paragraph (docs/benchmarks.md, "Follow-up questions").

``retrieval.condense_model`` chooses who condenses (``question_standalone``): ``rule`` (this rule,
the default), an LLM with the ``condense`` prompt template, or ``none`` (follow-ups asked as typed).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache, partial

from django.conf import settings

from core import llm, prompts
from core.config import CONDENSE_RULE
from core import language
from core.text import code_shape, is_code_or_name
from retrieval.models import ChunkSearch

SHORT_WORDS = 1
WHOLE_WORDS = 5  # a message of more content words that names nothing is a whole question, not a follow-up
# Question words and fillers that carry no topic: never carried over, never counted as content.
NON_TOPIC = frozenset(
    """
about also again any anything else explain tell more much many please say same does mean means
something give show list exactly one ones there here thing things way ways
ok okay thanks thank yes yeah right great sure just still even now already really actually
after before during while until since without within between through over under via per across against
along among around behind beyond onto toward towards upon out
""".split()
)
# "the first one", "the second one": the earlier turn of that place (0 is the first).
ORDINALS = {"first": 0, "second": 1, "third": 2, "fourth": 3}
LEADS = (
    "and ",
    "and,",
    "but ",
    "or ",
    "also ",
    "what about",
    "how about",
    "same for",
    "then ",
    "so ",
    "what if",
    "why ",
    "which one",
    "and what",
    "and how",
)
DEMONSTRATIVES = frozenset({"this", "that", "these", "those", "such"})
PRONOUNS = frozenset(
    {"it", "its", "it's", "itself", "they", "them", "their", "theirs", "themselves", "he", "she", "his", "her", "one"}
)
THIRD_PERSON = frozenset("it they he she".split())
QUESTION_STARTS = frozenset("what which where when who whom how is are was were".split())
AUXILIARIES = frozenset("do does did can could should must will would may might shall".split())
ADVERBS = frozenset("still also really ever always even actually already just never not".split())
DO_FORMS = frozenset({"doing", "done"})  # "once I've done that": "that" is what was done, a turn before
VERB_AFTER = frozenset("do does have has be mean means say show give".split())  # a main verb after the subject
MEAN_WHEN = frozenset({("mean", "when"), ("means", "when"), ("mean", "if"), ("means", "if")})  # "it" names a subject
DETERMINERS = frozenset("the a an its their his her my your our this that these those".split())
# Contractions, typed with or without the apostrophe, are their first word ("what's the default", "whats").
_CONTRACTED = re.compile(r"'(?:s|re|ll|m|ve|d)$|n't$")
_UNAPOSTROPHED = {
    "whats": "what", "hows": "how", "wheres": "where", "whens": "when", "whos": "who", "thats": "that",
    "im": "i", "ive": "i", "dont": "do", "doesnt": "does", "didnt": "did", "cant": "can", "isnt": "is",
    "arent": "are", "wont": "will", "wasnt": "was",
}  # fmt: skip
_AND_SIGN = re.compile(r"\s[+&]\s")
# a word, a code or a number ("2,400": a comma between digits is part of it)
_TOKEN = re.compile(r"[A-Za-zÀ-ÿ0-9](?:[A-Za-zÀ-ÿ0-9'.\-]|(?<=\d),(?=\d))*[A-Za-zÀ-ÿ0-9]|[A-Za-zÀ-ÿ0-9]")


@dataclass(frozen=True)
class Condensed:
    """A message and the standalone question made of it; ``carried`` is empty when it stood alone."""

    message: str
    question: str
    carried: tuple[str, ...] = ()
    antecedent: int | None = None  # index of the earlier turn whose terms were carried

    @property
    def rewritten(self) -> bool:
        return self.question != self.message

    def follows(self, answers: list[str]) -> str:
        """The answer of the earlier turn whose topic this follow-up carries, of ``answers`` (one per earlier
        turn, oldest first); "" when it carries none (it stood alone, or asks that turn again about another code)."""
        if not self.carried or self.antecedent is None or self.antecedent >= len(answers):
            return ""
        return answers[self.antecedent]


def condense(message: str, history: list[str], *, indexed: Callable[[str], bool] | None = None) -> Condensed:
    """The standalone question for ``message`` after the earlier user turns ``history`` (oldest first).

    ``indexed``: whether the sources hold a word; a plain word they do not hold is not carried (rule 3).
    Deterministic: the same message, history and sources always give the same question. Each earlier
    turn is first made standalone itself, so a chain of follow-ups keeps the topic of the turn that
    started it.
    """
    message = " ".join(message.split())
    typed = [" ".join(turn.split()) for turn in history]
    standalone: list[str] = []
    for i, turn in enumerate(typed):
        standalone.append(_condense_one(turn, typed[:i], standalone, indexed).question)
    return _condense_one(message, typed, standalone, indexed)


def question_standalone(*, message: str, history: list[str], collection_ids: Sequence[int] | None = None) -> Condensed:
    """The question to answer for ``message`` after ``history``, by the configured ``retrieval.condense_model``.

    With an LLM the model's first line is the question; a model failure raises ``llm.LLMError`` (the
    caller reports it), never a silent fall back to the message as typed. Without history nothing is
    condensed and no model is called. The rule carries only plain words that the sources of ``collection_ids``
    (the asker's scope; None: every collection) hold.
    """
    model = settings.FOUNDRY.retrieval.condense_model
    message = " ".join(message.split())
    if model == CONDENSE_RULE:
        holds = cache(partial(ChunkSearch.search.holds, collection_ids=collection_ids))  # each word looked up once
        return condense(message, history, indexed=holds)
    if model == "none" or not history:
        return Condensed(message, message)
    earlier = "\n".join(f"- {' '.join(turn.split())}" for turn in history)
    reply = llm.complete(
        messages=[{"role": "user", "content": prompts.render("condense", history=earlier, message=message)}],
        purpose="condense",
        model=model,
        max_tokens=120,
    )
    question = next((line.strip().strip('"') for line in reply.text.splitlines() if line.strip()), message)
    return Condensed(message, question or message)


def is_followup(message: str) -> bool:
    """Whether ``message`` needs an earlier turn to be understood (rule 1 of the module docstring)."""
    lowered = message.lower().strip()
    tokens = [t.lower() for t in _TOKEN.findall(message)]
    if not tokens:
        return False
    terms = key_terms(message)
    if len(terms) <= SHORT_WORDS and not _asks_of_code(tokens, terms):
        return True
    if lowered.startswith(LEADS):
        return True
    words = _TOKEN.findall(_AND_SIGN.sub(" and ", message))  # "the gateway + that psu": "that" qualifies no noun
    if any(_refers_back(words, i) for i in range(len(words))):
        return True
    # names nothing it is about, in a few words; more make a whole question ("What wire size should be used for
    # the power supply of the gateway?" asks nothing of "What does E03 mean?")
    return len(terms) <= WHOLE_WORDS and not any(is_code_or_name(w) or _proper(w) for w in words[1:])


def _asks_of_code(tokens: list[str], terms: list[str]) -> bool:
    """Whether a message of one topic word is a whole question about a code it names ("What does E03 mean?",
    "Where is X4?"): it names its own subject, as "When was 2.4.1 released?" does. "E03?" is no question."""
    first = _bare(tokens[0])
    return len(terms) == 1 and bool(_shape(terms[0])) and (first in QUESTION_STARTS or first in AUXILIARIES)


def _refers_back(words: list[str], i: int) -> bool:
    """Whether ``words[i]`` is a pronoun or demonstrative whose antecedent is not in the message itself."""
    low = _bare(words[i].lower())
    before = words[i - 1] if i else ""
    if low == "that" and before and _topic(before) and before.lower() not in DO_FORMS and i + 2 != len(words):
        # "the version that fixed", "wrote that": a relative pronoun or a conjunction ("done that": not); "which port
        # that uses", a verb ending the message after it, names no noun that "that" could qualify
        return False
    if low == "it":
        # "what does it mean when the LED blinks" (the subject follows) and "what does the RUN LED mean when it
        # is red" (the subject came before "mean"): "it" is that subject, not a turn before.
        lowered = [w.lower() for w in words]
        follows = tuple(lowered[i + 1 : i + 3]) in MEAN_WHEN
        if follows or (i >= 3 and tuple(lowered[i - 2 : i]) in MEAN_WHEN and _topic(words[i - 3])):
            return False
    if low in PRONOUNS and any(_proper(w) for w in words[1:i]):
        return False  # "How did France manage its colonies?": the antecedent is in the message
    return low in PRONOUNS or low in DEMONSTRATIVES


def key_terms(text: str) -> list[str]:
    """The topic words of ``text``, in order, once each: no stop words, question words or fillers."""
    seen: dict[str, str] = {}
    tokens = _TOKEN.findall(text)
    for i, token in enumerate(tokens):
        if _topic(token) and not _asking(tokens, i):
            seen.setdefault(_stem(token.lower().rstrip(".")), token.rstrip("."))
    return list(seen.values())


def _asking(tokens: list[str], i: int) -> bool:
    """Whether ``tokens[i]`` asks rather than names: the measure after "how" ("how long", "how heavy") or
    "how much" ("how much power": the quantity asked of the thing named after it), or the place of an earlier
    turn ("the first one")."""
    before = tokens[i - 1].lower() if i else ""
    after = tokens[i + 1].lower() if i + 1 < len(tokens) else ""
    how_much = before == "much" and i >= 2 and tokens[i - 2].lower() == "how"
    return before == "how" or how_much or (tokens[i].lower() in ORDINALS and after in ("one", "ones"))


def _ordinal(words: list[str], turns: int) -> int | None:
    """The earlier turn a message names by its place ("how do I fix the second one?"), if any."""
    places = [ORDINALS[w.lower()] for i, w in enumerate(words) if w.lower() in ORDINALS and _asking(words, i)]
    return places[0] if places and places[0] < turns else None


def _condense_one(
    message: str, typed: list[str], standalone: list[str], indexed: Callable[[str], bool] | None
) -> Condensed:
    if not standalone or not is_followup(message):
        return Condensed(message, message)
    own = _keys(message)
    overlaps = [len(own & _keys(q)) for q in typed]
    best = max(overlaps)
    index = max(i for i, n in enumerate(overlaps) if n == best) if best else len(standalone) - 1
    tokens = _TOKEN.findall(message)
    place = _ordinal(tokens, len(standalone))
    index = index if place is None else place
    again = _asked_again(message, standalone[index])
    if again:
        return Condensed(message, again, (), index)
    words = set(tokens)
    carried = tuple(
        t
        for t in subject_terms(standalone[index])
        if (t not in words if is_code_or_name(t) else _stem(t.lower()) not in own)
        and (not _shape(t) or _shape(t) not in own)
        and (indexed is None or is_code_or_name(t) or indexed(t))
    )
    if not carried:
        return Condensed(message, message)
    return Condensed(message, f"{message} ({' '.join(carried)})", carried, index)


def _asked_again(message: str, antecedent: str) -> str:
    """The antecedent asked again about the one code the message puts in place of one of its own ("and E05?"
    after "What does E04 mean?" is "What does E05 mean?"; "and 2.4.1?" after "When was 2.3.0 released?"), when
    the message adds nothing else; "" otherwise. A code is swapped only for the antecedent's one code of its
    shape the message lacks. Names are not swapped: "the LED" is no kind of "RESET" button."""
    before = _TOKEN.findall(antecedent)
    known = _keys(antecedent)
    terms = key_terms(message)
    new = [t for t in terms if is_code_or_name(t) and t not in before]
    if len(new) != 1 or not _shape(new[0]) or any(_stem(t.lower()) not in known for t in terms if t not in new):
        return ""
    words = set(_TOKEN.findall(message))
    old = {w for w in before if is_code_or_name(w) and w not in words and _shape(w) == _shape(new[0])}
    if len(old) != 1:
        return ""
    return re.sub(rf"(?<![\w.-]){re.escape(old.pop())}(?![\w-]|\.\w)", new[0], antecedent)


def subject_terms(question: str) -> list[str]:
    """The terms of ``question``'s noun phrases that a follow-up may lean on, in order, once each.

    A noun phrase is a run of topic words (``key_terms``) between stop words or punctuation. Left out:
    verbs ("connected", "use" in "does the gateway use"), and the asked-for attribute of an owner named
    after it ("operating temperature range" in "the operating temperature range of the PX-100"): a
    follow-up asks something else about the owner. With no owner the attribute stays; capitalised
    words before "of" are part of one name ("University of Chicago"), and a phrase with a code is no
    attribute ("terminal X4 of the PX-100").
    """
    phrases = _phrases(question)
    kept = [words for words, followed_by_of in phrases if not followed_by_of] or [w for w, _ in phrases]
    seen: dict[str, str] = {}
    for words in kept:
        for word in words:
            seen.setdefault(_stem(word.lower()), word)
    return list(seen.values())


def _phrases(text: str) -> list[tuple[list[str], bool]]:
    """Noun phrases of ``text`` as (words, followed by "of"): runs of topic words with verbs removed."""
    tokens = re.findall(_TOKEN.pattern + r"|[^\sA-Za-zÀ-ÿ0-9]", text)
    phrases: list[tuple[list[str], bool]] = []
    run: list[str] = []
    before = article = ""  # the word before the current run, and its determiner
    leads = False  # that word starts its sentence ("Do the sensors need …": a yes/no question)

    def close(after: str) -> None:
        nonlocal run
        words = list(run)
        # do-support: "which protocol does the gateway use" ends the subject with the main verb; not so in "do a
        # factory reset" ("do" is the verb) nor at the end of a yes/no question ("Do the sensors need addresses?")
        ends_question = leads and after in ("?", ".", "!", "")
        supported = before in AUXILIARIES and article not in ("a", "an") and not ends_question
        if len(words) > 1 and supported and after not in VERB_AFTER and _plain(words[-1]):
            words.pop()
        if words and before in THIRD_PERSON and _plain(words[0]):
            words.pop(0)  # "does it use": the word after "it" is its verb ("Can I delay …": the asker's is kept)
        if words and _participle(words[-1]):
            words.pop()  # "can be connected", "is MQTT enabled": a participle ending the run is the verb
        if words:
            # "of" after a name's capitalised words continues the name ("University of Chicago"); a phrase
            # with a code names a thing, not an attribute ("terminal X4 of the PX-100")
            owned = not all(w[:1].isupper() for w in words) and not any(_shape(w) for w in words)
            phrases.append((words, after == "of" and owned))
        run = []

    previous = ""
    for i, token in enumerate(tokens):
        low = token.lower().rstrip(".")
        if _topic(token) and not _asking(tokens, i):
            if not run:
                at = i - 1 if previous not in DETERMINERS else i - 2  # where ``before`` stands
                before = tokens[at].lower().rstrip(".") if at >= 0 else ""
                article = previous if previous in DETERMINERS else ""
                leads = at == 0 or (at > 0 and tokens[at - 1] in ".?!")
            run.append(token.rstrip("."))
        else:
            if run:  # the next word past an adverb: "will the PX-100's clock still be right" ends at "be"
                close(next((t.lower() for t in tokens[i:] if t.lower() not in ADVERBS), ""))
        previous = low
    if run:
        close("")
    return phrases


def _bare(low: str) -> str:
    """A lower-case word without its contraction: "what's" and "whats" are "what", "can't" is "can"."""
    unapostrophed = _UNAPOSTROPHED.get(low.replace("'", ""))
    return unapostrophed or _CONTRACTED.sub("", low)


# The rule condenser reads English follow-ups (its word classes below are English); a follow-up in another language
# is made standalone by ``retrieval.condense_model`` (an LLM) where one is configured.
_STOP_WORDS = language.analyzer("en").stop_words


def _topic(token: str) -> bool:
    """A topic word: not a stop word, question word, filler, auxiliary, pronoun or demonstrative."""
    low = _bare(token.lower().rstrip("."))
    return not (
        low in _STOP_WORDS
        or low in NON_TOPIC
        or low in AUXILIARIES
        or low in PRONOUNS
        or low in DEMONSTRATIVES
        or len(low) < 2
        or not any(ch.isalnum() for ch in low)
    )


def _proper(word: str) -> bool:
    """A proper noun: capitalised, the rest lower case ("France", "Bismarck"); not "I"."""
    return len(word) > 1 and word[0].isupper() and word[1:].islower() and word.isalpha()


def _plain(word: str) -> bool:
    """A lower-case word with no digit: could be a verb (a code or a name never is)."""
    return word.islower() and not any(ch.isdigit() for ch in word)


def _participle(word: str) -> bool:
    """A lower-case past participle ("connected", "used", "enabled"), a verb form in a question."""
    return _plain(word) and len(word) >= 4 and word.endswith("ed") and not word.endswith("eed")


def _keys(text: str) -> set[str]:
    terms = key_terms(text)
    return {_stem(t.lower()) for t in terms} | {_shape(t) for t in terms if _shape(t)}


def _shape(term: str) -> str:
    """A code's shape ("E06" and "E05": "A9"; "X3": "A9"; "2.4.1": "9.9.9"), or "" for a plain word."""
    if not any(ch.isdigit() for ch in term) or not any(ch.isalpha() for ch in term) and "." not in term:
        return ""
    return "#" + code_shape(term)


def _stem(word: str) -> str:
    """Crude stem so that "sensor" and "sensors", "reset" and "resetting" match (6 letters, as grounding does)."""
    return word[:6]
