"""A summary stand-in of the requested length, for replays without a summarizer endpoint.

The policy asks for a summary of N words (``prompts.requested_words``); the stand-in answers with
N one-token words, so the replayed context has the size a summary of the requested length would
give it. Its content carries no information: a replay with placeholders measures sizes and
costs, never what a summary keeps (the run is marked ``replay_summaries: placeholder``).
"""

from __future__ import annotations

import re
import time

from ctxpolicy.policies.prompts import BLOCK_BEGIN, BLOCK_END, PARTS, PROMPT_FOR_STAGE, TARGET_WORDS, load_prompt
from ctxpolicy.policies.summarizer import SummaryCall
from ctxpolicy.tokens import count_messages, count_text, join_counted

MODEL = "placeholder"
FILLER = "gist"  # one cl100k_base token, with its leading space
DEFAULT_WORDS = 100
_RUN = 512  # words per piece of the filler: a summary of N words is counted from N / _RUN pieces


def _filler(words: int) -> list[str]:
    """``" ".join([FILLER] * words)`` as pieces (each a run of words, every run but the first
    with its leading space), so that ``join_counted`` counts it from two cached counts."""
    whole, rest = divmod(words, _RUN)
    runs = [" ".join([FILLER] * _RUN)] * whole + ([" ".join([FILLER] * rest)] if rest else [])
    return runs[:1] + [" " + run for run in runs[1:]]


def _word_count_patterns() -> list[re.Pattern]:
    """For each template part holding the word count: the text before it, then the number."""
    patterns = []
    for name in sorted(set(PROMPT_FOR_STAGE.values())):
        pair = load_prompt(name)
        for part in PARTS:
            template = getattr(pair, part)
            if TARGET_WORDS in template:
                head = template[: template.index(TARGET_WORDS)]
                patterns.append(re.compile(re.escape(head[-80:]) + r"(\d+)"))
    return patterns


class PlaceholderSummarizer:
    """``ctxpolicy.policies.Summarizer`` that writes N filler words, N being the requested length."""

    model = MODEL

    def __init__(self):
        self._patterns = _word_count_patterns()

    def requested_words(self, request_messages: list[dict]) -> int:
        text = "\n".join(str(m.get("content") or "") for m in request_messages)
        for pattern in self._patterns:
            match = pattern.search(text)
            if match:
                return int(match.group(1))
        return DEFAULT_WORDS

    def summarize(self, request_messages: list[dict]) -> SummaryCall:
        start = time.time()
        words = self.requested_words(request_messages)
        prompt = "\n".join(str(m.get("content") or "") for m in request_messages)
        body = _filler(words)
        text = (
            join_counted([f"{BLOCK_BEGIN}\n", *body, f"\n{BLOCK_END}"]) if BLOCK_BEGIN in prompt else join_counted(body)
        )
        return SummaryCall(
            request_messages, text, count_messages(request_messages), count_text(text), None, start, time.time(), MODEL
        )
