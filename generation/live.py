"""Grounding a model's reply sentence by sentence while it is being written.

With ``on_sentence`` (the ask page's stream, ``/v1/chat/completions`` with ``stream: true``) the answer
model's reply is streamed. Each time the reply grows, every sentence that is finished (a later sentence has
begun) and not yet checked is grounded on its own against the passages; a supported one is sent at once,
an unsupported one never is. A sentence's verdict depends only on its text and the passages, so these are
the verdicts and the kept text that grounding the whole reply gives (``grounding.ground``): the sentences
sent, joined, begin the final answer, and the rest of it (the last sentence, checked once the reply is
complete) follows.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from core.grounding import Grounder, is_refusal, split_sentences

# A citation marker still being written ("[S", "(S1,") would change the sentence it ends: hold it back.
_OPEN_MARKER = re.compile(r"[\[(][^\])\n]{0,40}$")


class SentenceGate:
    """Feeds finished sentences of a growing reply to the grounding check; calls ``send`` with each kept one."""

    def __init__(self, grounder: Grounder, send: Callable[[str], None]) -> None:
        self.grounder = grounder
        self.send = send
        self.checked = 0  # sentences of the reply looked at so far
        self.seen: set[str] = set()
        self.sent = ""

    def grow(self, text: str) -> None:
        """``text``: the whole reply so far. Checks each sentence that is now finished."""
        sentences = split_sentences(_OPEN_MARKER.sub("", text))
        for sentence in sentences[self.checked : len(sentences) - 1]:
            self.checked += 1
            self._check(sentence.text, sentence.cited)

    def finish(self, answer: str) -> None:
        """Send what the finished ``answer`` (the whole reply's grounded text) holds beyond what was sent."""
        if self.sent and not answer.startswith(self.sent):  # a bug: fail loudly rather than send a contradiction
            raise RuntimeError("the sentences sent differ from the grounded answer")
        if len(answer) > len(self.sent):
            rest = answer[len(self.sent) :]
            self.sent = answer
            self.send(rest)

    def _check(self, text: str, cited: list[str]) -> None:
        if text.lower() in self.seen or is_refusal(text):  # as grounding.ground skips them
            return
        self.seen.add(text.lower())
        grounded = self.grounder.ground(text + "".join(f" [{c}]" for c in cited))
        if grounded.refused or not grounded.text:
            return
        piece = (" " if self.sent else "") + grounded.text
        self.sent += piece
        self.send(piece)
