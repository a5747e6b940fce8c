"""``anthropic``: Anthropic's prompt caching with explicit breakpoints, as an agent sets them.

Breakpoints (at most 4; we use 3) are where mini-swe-agent and agents like it put them: the end
of the system prompt, the end of the previous observation (the prompt without its newest reply
and observation) and the end of the prompt (mini-swe-agent's ``set_cache_control`` marks its last
user messages; a system-prompt mark is what most agents add). A call writes the prefix through
each of its breakpoints to the cache (when that prefix is at least 1,024 server tokens, the
smallest cacheable prompt of Claude's larger models); a later call reads the longest cached
prefix of its own prompt that is still alive: an entry lives 5 minutes from its last write or
read, by the calls' start times (without times, nothing expires). Counts are not floored to
``--block``: a breakpoint caches exactly its prefix. Cached = that prefix; written
= the rest of the prompt up to its last breakpoint (the end), billed at the write premium
(1.25 x a fresh token, so 0.25 beyond it, fresh-token units); a prompt shorter than 1,024
tokens writes nothing. Local shares are rescaled to the call's server prompt, as ``exact``.
"""

from __future__ import annotations

import numpy as np

from ctxpolicy.metrics.cost import prefix_hashes
from ctxpolicy.metrics.cost_methods.base import SEQUENCES, TIMES, CostMethod, Counts, RunCalls

MIN_PREFIX = 1024
TTL_S = 300.0
WRITE_PREMIUM = 0.25
MAX_BREAKPOINTS = 4


def breakpoints(length: int) -> list[int]:
    """Prefix lengths (in messages) that end at a breakpoint, for a prompt of ``length`` messages."""
    marks = sorted({m for m in (1, length - 2, length) if m >= 1})
    return marks[-MAX_BREAKPOINTS:]


def count(calls: RunCalls, block: int) -> Counts:
    import pandas as pd

    s = calls.sequences
    n = len(calls)
    prompts = calls.prompts
    call = np.repeat(np.arange(n), s.lengths)
    offset = np.cumsum(s.lengths) - s.lengths
    local = s.tokens.cumsum() - np.repeat(np.r_[0, s.tokens.cumsum()][offset], s.lengths)
    totals = np.bincount(call, weights=s.tokens, minlength=n).astype(np.int64)
    server = local * prompts[call] // np.maximum(totals[call], 1)  # server tokens through here
    marks = np.zeros(len(s.codes), dtype=bool)
    for k in range(n):
        for m in breakpoints(int(s.lengths[k])):
            marks[offset[k] + m - 1] = True
    writes = marks & (server >= MIN_PREFIX)
    codes, _ = pd.factorize(prefix_hashes(s.codes, s.lengths))
    # for each position, the latest earlier call that wrote its prefix (-1: none)
    keys = codes.astype(np.int64) * (n + 1) + call
    written_keys = np.sort(keys[writes])
    at = np.searchsorted(written_keys, keys, side="left") - 1
    candidate = np.where(at >= 0, written_keys[np.maximum(at, 0)], -1) if len(written_keys) else np.full(len(keys), -1)
    writer = np.where((at >= 0) & (candidate // (n + 1) == codes), candidate % (n + 1), -1)
    times = calls.filled("start", np.nan).astype(float)
    read_at: dict[int, float] = {}  # prefix code -> time of its latest read
    cached = np.zeros(n, dtype=np.int64)
    for k in range(n):
        here = np.arange(offset[k], offset[k] + s.lengths[k])
        for j in here[writer[here] >= 0][::-1]:  # the longest prefix first
            last = max(times[writer[j]], read_at.get(int(codes[j]), -np.inf))
            if np.isnan(times[k]) or np.isnan(last) or times[k] - last <= TTL_S:
                cached[k] = min(int(server[j]), int(prompts[k]))
                read_at[int(codes[j])] = times[k]
                break
    written = np.where(prompts >= MIN_PREFIX, prompts - cached, 0)
    return Counts(cached, written)


METHOD = CostMethod(
    name="anthropic",
    key="anthropic",
    label="Anthropic cache",
    description="Anthropic's cache: 3 agent breakpoints, prefixes from 1,024 tokens, 5-minute TTL, writes at 1.25x",
    count=count,
    needs=(SEQUENCES, TIMES),
    writes=True,
    write_premium=WRITE_PREMIUM,
)
