"""Constraints: sentences that state a rule for the agent ("You must not edit the tests.",
"Only change files under src/.", "Never run git push.").

A sentence is a constraint when it holds one of the rule words (must, must not, never, do not,
don't, always, shall not, may not) or starts with "Only". Fenced code blocks are left out
(code and commands are anchors, not rules), and so are the agent's own messages: a rule is
something the agent was told. Detection is lexical and deterministic.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from ctxpolicy.analysis.memo import text_memo
from ctxpolicy.policies.history import text_of

RULE = re.compile(r"\b(?:must|mustn't|never|do not|don't|always|shall not|may not)\b", re.IGNORECASE)
ONLY_FIRST = re.compile(r"^(?:[-*•]\s*)?only\b", re.IGNORECASE)
CODE_BLOCK = re.compile(r"```.*?(?:```|\Z)", re.DOTALL)
SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
MIN_WORDS, MAX_CHARS = 3, 400


def sentences(text: str) -> list[str]:
    text = CODE_BLOCK.sub("\n", text)
    parts = (re.sub(r"\s+", " ", p).strip() for p in SENTENCE_END.split(text))
    return [p for p in parts if p]


def is_constraint(sentence: str) -> bool:
    if len(sentence.split()) < MIN_WORDS or len(sentence) > MAX_CHARS:
        return False
    return bool(RULE.search(sentence) or ONLY_FIRST.search(sentence))


# What a constraint cannot do without (a rule word, or "only"): an ASCII text holding none of
# these in lower case holds no constraint and is not split into sentences.
_RULE_STEMS = ("must", "never", "do", "always", "shall", "may", "only")


def constraints_in(text: str) -> list[str]:
    """The constraint sentences of a text, in order, each once."""
    return list(_constraints_in(text))


@text_memo()
def _constraints_in(text: str) -> tuple[str, ...]:
    """``constraints_in``, memoised (the audit meets the same messages at every step)."""
    if text.isascii():
        lowered = text.lower()
        if not any(stem in lowered for stem in _RULE_STEMS):
            return ()
    return tuple(dict.fromkeys(s for s in sentences(text) if is_constraint(s)))


def constraints_of(messages: Iterable[Mapping[str, Any]]) -> list[str]:
    """Constraints of every message but the agent's own, in order, each once."""
    found: dict[str, None] = {}
    for message in messages:
        if message.get("role") != "assistant":
            found.update(dict.fromkeys(constraints_in(text_of(message))))
    return list(found)


def restated(constraint: str, text: str) -> bool:
    """Whether ``text`` repeats the constraint word for word (case and blanks aside)."""
    return _squeezed(constraint) in _squeezed(text)


@text_memo(max_chars=8_000_000)
def _squeezed(text: str) -> str:
    """Blanks as one space, lower case (memoised: a step asks about each of its constraints in
    the same text)."""
    return re.sub(r"\s+", " ", text).strip().lower()
