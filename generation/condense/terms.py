"""What a message is about: whether it leans on an earlier turn, its topic words, and a question's noun phrases.

Every word class comes from the language being read (``words.condensing``).
"""

from __future__ import annotations

import re

from core.text import code_shape, is_code_or_name
from generation.condense.words import current, stem

SHORT_WORDS = 1
WHOLE_WORDS = 5  # a message of more content words that names nothing is a whole question, not a follow-up
_AND_SIGN = re.compile(r"\s[+&]\s")
# a word, a code or a number ("2,400": a comma between digits is part of it)
_TOKEN = re.compile(r"[A-Za-zÀ-ÿ0-9](?:[A-Za-zÀ-ÿ0-9'.\-]|(?<=\d),(?=\d))*[A-Za-zÀ-ÿ0-9]|[A-Za-zÀ-ÿ0-9]")


def tokens_of(text: str) -> list[str]:
    return _TOKEN.findall(text)


def is_followup(message: str) -> bool:
    """Whether ``message`` needs an earlier turn to be understood (rule 1 of ``generation.condense``)."""
    lowered = message.lower().strip()
    tokens = [t.lower() for t in _TOKEN.findall(message)]
    if not tokens:
        return False
    terms = key_terms(message)
    if len(terms) <= SHORT_WORDS and not _asks_of_code(tokens, terms):
        return True
    if lowered.startswith(current().leads):
        return True
    # "the gateway + that psu": "that" qualifies no noun
    words = _TOKEN.findall(_AND_SIGN.sub(f" {current().and_word} ", message))
    if any(_refers_back(words, i) for i in range(len(words))):
        return True
    # names nothing it is about, in a few words; more make a whole question ("What wire size should be used for
    # the power supply of the gateway?" asks nothing of "What does E03 mean?")
    return len(terms) <= WHOLE_WORDS and not any(is_code_or_name(w) or _proper(w) for w in words[1:])


def _asks_of_code(tokens: list[str], terms: list[str]) -> bool:
    """Whether a message of one topic word is a whole question about a code it names ("What does E03 mean?",
    "Where is X4?"): it names its own subject, as "When was 2.4.1 released?" does. "E03?" is no question."""
    first, w = _bare(tokens[0]), current()
    return len(terms) == 1 and bool(shape(terms[0])) and (first in w.question_starts or first in w.auxiliaries)


def _refers_back(words: list[str], i: int) -> bool:
    """Whether ``words[i]`` is a pronoun or demonstrative whose antecedent is not in the message itself."""
    w = current()
    low = _bare(words[i].lower())
    before = words[i - 1] if i else ""
    if low in w.relatives and before and _topic(before) and before.lower() not in w.do_forms and i + 2 != len(words):
        # "the version that fixed", "wrote that": a relative pronoun or a conjunction ("done that": not); "which port
        # that uses", a verb ending the message after it, names no noun that "that" could qualify
        return False
    if low in w.announcing:
        # "what does it mean when the LED blinks" (the subject follows) and "what does the RUN LED mean when it
        # is red" (the subject came before "mean"): "it" is that subject, not a turn before.
        lowered = [x.lower() for x in words]
        follows = tuple(lowered[i + 1 : i + 3]) in w.mean_when
        if follows or (i >= 3 and tuple(lowered[i - 2 : i]) in w.mean_when and _topic(words[i - 3])):
            return False
    if low in w.pronouns and not w.nouns_capitalised and any(_proper(x) for x in words[1:i]):
        # "How did France manage its colonies?": the antecedent is in the message (where every noun is capitalised,
        # the noun before a pronoun tells nothing: "Welche Einstellung braucht der Drucker dafür?")
        return False
    return low in w.pronouns or low in w.demonstratives


def key_terms(text: str) -> list[str]:
    """The topic words of ``text``, in order, once each: no stop words, question words or fillers."""
    seen: dict[str, str] = {}
    tokens = _TOKEN.findall(text)
    for i, token in enumerate(tokens):
        if _topic(token) and not _asking(tokens, i):
            seen.setdefault(stem(token.lower().rstrip(".")), token.rstrip("."))
    return list(seen.values())


def _asking(tokens: list[str], i: int) -> bool:
    """Whether ``tokens[i]`` asks rather than names: the measure after "how" ("how long", "how heavy") or
    "how much" ("how much power": the quantity asked of the thing named after it), or the place of an earlier
    turn ("the first one")."""
    w = current()
    before = tokens[i - 1].lower() if i else ""
    after = tokens[i + 1].lower() if i + 1 < len(tokens) else ""
    quantity = i >= 2 and (tokens[i - 2].lower(), before) in w.quantity_after
    return before in w.measure_after or quantity or (tokens[i].lower() in w.ordinals and after in w.ordinal_nouns)


def ordinal(words: list[str], turns: int) -> int | None:
    """The earlier turn a message names by its place ("how do I fix the second one?"), if any."""
    places = current().ordinals
    named = [places[x.lower()] for i, x in enumerate(words) if x.lower() in places and _asking(words, i)]
    return named[0] if named and named[0] < turns else None


def subject_terms(question: str) -> list[str]:
    """The terms of ``question``'s noun phrases that a follow-up may lean on, in order, once each.

    A noun phrase is a run of topic words (``key_terms``) between stop words or punctuation. Left out:
    verbs ("connected", "use" in "does the gateway use"), and the asked-for attribute of an owner named
    after it ("operating temperature range" in "the operating temperature range of the PX-100"): a
    follow-up asks something else about the owner. With no owner the attribute stays; capitalised
    words before "of" are part of one name ("University of Chicago"), and a phrase with a code is no
    attribute ("terminal X4 of the PX-100"). Where every noun is capitalised (German) a noun phrase's terms are
    its nouns and codes: a lower-case word there is a verb, an adjective or an adverb.
    """
    phrases = _phrases(question)
    kept = [words for words, followed_by_of in phrases if not followed_by_of] or [w for w, _ in phrases]
    seen: dict[str, str] = {}
    for words in kept:
        for word in words:
            if current().nouns_capitalised and not (word[:1].isupper() or shape(word)):
                continue
            seen.setdefault(stem(word.lower()), word)
    return list(seen.values())


def _phrases(text: str) -> list[tuple[list[str], bool]]:
    """Noun phrases of ``text`` as (words, followed by "of"): runs of topic words with verbs removed."""
    w = current()
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
        supported = before in w.auxiliaries and article not in w.indefinite_articles and not ends_question
        if len(words) > 1 and supported and after not in w.verb_after and _plain(words[-1]):
            words.pop()
        if words and before in w.third_person and _plain(words[0]):
            words.pop(0)  # "does it use": the word after "it" is its verb ("Can I delay …": the asker's is kept)
        if words and _participle(words[-1]):
            words.pop()  # "can be connected", "is MQTT enabled": a participle ending the run is the verb
        if words:
            # "of" after a name's capitalised words continues the name ("University of Chicago"); a phrase
            # with a code names a thing, not an attribute ("terminal X4 of the PX-100")
            named = all(x[:1].isupper() for x in words) and not w.nouns_capitalised
            owned = not named and not any(shape(x) for x in words)
            phrases.append((words, after in w.owner_of and owned))
        run = []

    previous = ""
    for i, token in enumerate(tokens):
        low = token.lower().rstrip(".")
        if _topic(token) and not _asking(tokens, i):
            if not run:
                at = i - 1 if previous not in w.determiners else i - 2  # where ``before`` stands
                before = tokens[at].lower().rstrip(".") if at >= 0 else ""
                article = previous if previous in w.determiners else ""
                leads = at == 0 or (at > 0 and tokens[at - 1] in ".?!")
            run.append(token.rstrip("."))
        else:
            if run:  # the next word past an adverb: "will the PX-100's clock still be right" ends at "be"
                close(next((t.lower() for t in tokens[i:] if t.lower() not in w.adverbs), ""))
        previous = low
    if run:
        close("")
    return phrases


def _bare(low: str) -> str:
    """A lower-case word without its contraction: "what's" and "whats" are "what", "can't" is "can"."""
    w = current()
    unapostrophed = w.unapostrophed.get(low.replace("'", ""))
    return unapostrophed or (w.contracted.sub("", low) if w.contracted else low)


def _topic(token: str) -> bool:
    """A topic word: not a stop word, question word, filler, auxiliary, pronoun or demonstrative."""
    w = current()
    low = _bare(token.lower().rstrip("."))
    return not (
        low in w.stop_words
        or low in w.non_topic
        or low in w.auxiliaries
        or low in w.pronouns
        or low in w.demonstratives
        or len(low) < 2
        or not any(ch.isalnum() for ch in low)
    )


def _proper(word: str) -> bool:
    """A proper noun: capitalised, the rest lower case ("France", "Bismarck"); not "I". Where every noun is
    capitalised (German) it is any noun: a message naming one names what it asks about."""
    return len(word) > 1 and word[0].isupper() and word[1:].islower() and word.isalpha()


def _plain(word: str) -> bool:
    """A lower-case word with no digit: could be a verb (a code or a name never is)."""
    return word.islower() and not any(ch.isdigit() for ch in word)


def _participle(word: str) -> bool:
    """A lower-case past participle ("connected", "used", "enabled"), a verb form in a question."""
    return _plain(word) and current().participle.search(word) is not None


def keys(text: str) -> set[str]:
    terms = key_terms(text)
    return {stem(t.lower()) for t in terms} | {shape(t) for t in terms if shape(t)}


def shape(term: str) -> str:
    """A code's shape ("E06" and "E05": "A9"; "X3": "A9"; "2.4.1": "9.9.9"), or "" for a plain word."""
    if not any(ch.isdigit() for ch in term) or not any(ch.isalpha() for ch in term) and "." not in term:
        return ""
    return "#" + code_shape(term)
