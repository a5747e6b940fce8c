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

import math

import numpy as np

from ctxpolicy.metrics.cost import prefix_hashes
from ctxpolicy.metrics.cost_methods.base import SEQUENCES, TIMES, CostMethod, Counts, RunCalls

MIN_PREFIX = 1024
TTL_S = 300.0
WRITE_PREMIUM = 0.25


def breakpoint_positions(lengths: np.ndarray) -> np.ndarray:
    """Where the calls' breakpoints fall in their sequences laid end to end (``lengths[k]``
    messages each): after the first message, after all but the newest reply and observation, and
    after the last message, each one that falls within its prompt (two may fall on one message)."""
    lengths = np.asarray(lengths, dtype=np.int64)
    offset = np.cumsum(lengths) - lengths
    ends = [np.ones_like(lengths), lengths - 2, lengths]  # prefix lengths, in messages
    return np.concatenate([(offset + end - 1)[(end >= 1) & (end <= lengths)] for end in ends])


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
    marks[breakpoint_positions(s.lengths)] = True
    writes = marks & (server >= MIN_PREFIX)
    codes, _ = pd.factorize(prefix_hashes(s.codes, s.lengths))
    # for each position, the latest earlier call that wrote its prefix (-1: none)
    keys = codes.astype(np.int64) * (n + 1) + call
    written_keys = np.sort(keys[writes])
    at = np.searchsorted(written_keys, keys, side="left") - 1
    candidate = np.where(at >= 0, written_keys[np.maximum(at, 0)], -1) if len(written_keys) else np.full(len(keys), -1)
    writer = np.where((at >= 0) & (candidate // (n + 1) == codes), candidate % (n + 1), -1)
    return Counts(*_reads(writer, codes, server, prompts, calls.filled("start", np.nan).astype(float), offset))


def _reads(
    writer: np.ndarray,
    codes: np.ndarray,
    server: np.ndarray,
    prompts: np.ndarray,
    times: np.ndarray,
    offset: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Each call's cached tokens (its longest prefix written by an earlier call and still alive)
    and written tokens. The entries' lifetimes make each call depend on the reads before it, so
    the calls are walked in order, over plain lists (a few positions each, the longest first)."""
    n = len(prompts)
    readable = np.flatnonzero(writer >= 0)  # positions an earlier call wrote
    first = np.searchsorted(readable, offset).tolist()
    last = np.searchsorted(readable, offset + np.diff(np.r_[offset, len(codes)])).tolist()
    readable, writer_of, code_of = readable.tolist(), writer.tolist(), codes.tolist()
    server_at, prompt_of, time_of = server.tolist(), prompts.tolist(), times.tolist()
    read_at: dict[int, float] = {}  # prefix code -> time of its latest read
    cached = [0] * n
    for k in range(n):
        now = time_of[k]
        for at in range(last[k] - 1, first[k] - 1, -1):  # the longest prefix first
            j = readable[at]
            alive_since = max(time_of[writer_of[j]], read_at.get(code_of[j], -math.inf))
            if now != now or alive_since != alive_since or now - alive_since <= TTL_S:  # NaN: no times
                cached[k] = min(server_at[j], prompt_of[k])
                read_at[code_of[j]] = now
                break
    cached_array = np.array(cached, dtype=np.int64)
    return cached_array, np.where(prompts >= MIN_PREFIX, prompts - cached_array, 0)


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
