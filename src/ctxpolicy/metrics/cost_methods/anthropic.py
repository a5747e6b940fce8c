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

from ctxpolicy.metrics import tree_kernels
from ctxpolicy.metrics.cost_methods.base import SEQUENCES, TIMES, CostMethod, Counts, PrefixTrees, RunCalls

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
    if isinstance(calls.sequences, PrefixTrees):
        return _count_trees(calls, calls.sequences.trees)
    s = calls.sequences
    n = len(calls)
    prompts = calls.prompts
    ends = np.cumsum(s.lengths)
    through = np.cumsum(np.concatenate((np.zeros(1, s.tokens.dtype), s.tokens)))  # tokens before each position
    before, totals = through[ends - s.lengths], through[ends] - through[ends - s.lengths]

    def server(positions: np.ndarray, owner: np.ndarray) -> np.ndarray:
        """Server tokens of the prefix through each position (of call ``owner``)."""
        return (through[positions + 1] - before[owner]) * prompts[owner] // np.maximum(totals[owner], 1)

    codes = calls.prefix_codes()
    marks = breakpoint_positions(s.lengths)
    mark_call = calls.call_of()[marks]
    writes = server(marks, mark_call) >= MIN_PREFIX
    written_keys = np.sort(codes[marks[writes]].astype(np.int64) * (n + 1) + mark_call[writes])
    # the positions whose prefix an earlier call wrote: those whose prefix's first writer came before
    written_code, written_by = written_keys // (n + 1), written_keys % (n + 1)
    first = np.concatenate(([True], written_code[1:] != written_code[:-1]))[: len(written_code)]
    first_writer = np.full(int(codes.max(initial=-1)) + 1, n, dtype=np.int64)
    first_writer[written_code[first]] = written_by[first]
    positions = np.flatnonzero(first_writer[codes] < calls.call_of())
    owner = calls.call_of()[positions]

    def latest_writer(at: np.ndarray) -> np.ndarray:
        """The latest call before its own that wrote the prefix of each of ``positions[at]``."""
        keys = codes[positions[at]].astype(np.int64) * (n + 1) + owner[at]
        return written_keys[np.searchsorted(written_keys, keys, side="left") - 1] % (n + 1)

    times = calls.filled("start", np.nan).astype(float)
    # a call's longest readable prefix is read when the call comes within the lifetime of its
    # write (an earlier read only extends it): the call's shorter ones are then never looked at
    longest = np.concatenate((owner[1:] != owner[:-1], [True]))[: len(owner)]
    now, written_at = times[owner[longest]], times[latest_writer(longest)]
    sure = np.isnan(now) | np.isnan(written_at) | (now - written_at <= TTL_S)
    settled = np.zeros(n, dtype=bool)
    settled[owner[longest][sure]] = True
    looked_at = longest | ~settled[owner]
    writer = latest_writer(looked_at)
    positions, owner = positions[looked_at], owner[looked_at]
    served = np.minimum(server(positions, owner), prompts[owner])
    # where every call of a run reads its longest prefix within its write's lifetime, a read only
    # extends an entry's life, so the walk below would take each call's longest prefix too: only
    # the runs (``calls.runs``; one without) with another call are walked
    cached = np.zeros(n, dtype=np.int64)
    cached[owner] = served  # the longest prefix where settled (the only position looked at)
    if not settled[owner].all():
        run_of_call = np.zeros(n, np.int64) if calls.runs is None else np.repeat(np.arange(len(calls.runs)), calls.runs)
        walked = np.zeros(int(run_of_call.max(initial=0)) + 1, dtype=bool)
        walked[run_of_call[owner[~settled[owner]]]] = True
        walk = walked[run_of_call[owner]]
        reads = _reads(
            owner[walk], writer=writer[walk], prefix=codes[positions[walk]], served=served[walk], times=times, n=n
        )
        cached = np.where(walked[run_of_call], reads, cached)
    return Counts(cached, np.where(prompts >= MIN_PREFIX, prompts - cached, 0))


def _count_trees(calls: RunCalls, trees) -> Counts:
    """``count`` over prefix trees (``base.PrefixTree``, one a run): the same cache, walked call by
    call (``tree_kernels.breakpoint_reads``). A call reads the longest prefix on its path that an
    earlier call of its run wrote and whose entry is still alive (walked up from its whole prompt:
    after the newest written prefix, typically the previous call's, it stops), then writes the
    prefixes through its breakpoints (``breakpoint_positions``' three, by their nodes)."""
    prompts = calls.prompts
    times = calls.filled("start", np.nan).astype(float)
    in_trees = sum(len(tree.ends) for tree in trees)
    if in_trees != len(prompts):  # the compiled walk reads its arrays unchecked
        raise ValueError(f"{len(prompts)} calls for trees of {in_trees} prompts")
    parts, at = [], 0
    for tree in trees:
        n = len(tree.ends)
        lengths = np.asarray(tree.lengths, dtype=np.int64)
        parts.append(
            tree_kernels.breakpoint_reads(
                tree.parent,
                tree.tokens,
                tree.first,
                tree.ends,
                lengths,
                prompts[at : at + n],
                times[at : at + n],
                MIN_PREFIX,
                TTL_S,
            )
        )
        at += n
    cached = parts[0] if len(parts) == 1 else np.concatenate([np.zeros(0, np.int64), *parts])
    return Counts(cached, np.where(prompts >= MIN_PREFIX, prompts - cached, 0))


def _reads(
    owner: np.ndarray,
    *,
    writer: np.ndarray,
    prefix: np.ndarray,
    served: np.ndarray,
    times: np.ndarray,
    n: int,
) -> np.ndarray:
    """Each call's cached tokens: its longest prefix (of the positions, each in call ``owner``,
    written by call ``writer``, numbered ``prefix``, ``served`` tokens from the cache) that is
    still alive. The entries' lifetimes make each call depend on the reads before it, so the
    calls are walked in order, over plain lists (a few positions each, the longest first)."""
    first = np.searchsorted(owner, np.arange(n), side="left").tolist()
    last = np.searchsorted(owner, np.arange(n), side="right").tolist()
    writer_of, prefix_of, served_of, time_of = writer.tolist(), prefix.tolist(), served.tolist(), times.tolist()
    read_at: dict[int, float] = {}  # prefix number -> time of its latest read
    cached = [0] * n
    for k in range(n):
        now = time_of[k]
        for at in range(last[k] - 1, first[k] - 1, -1):  # the longest prefix first
            alive_since = max(time_of[writer_of[at]], read_at.get(prefix_of[at], -math.inf))
            if now != now or alive_since != alive_since or now - alive_since <= TTL_S:  # NaN: no times
                cached[k] = served_of[at]
                read_at[prefix_of[at]] = now
                break
    return np.array(cached, dtype=np.int64)


METHOD = CostMethod(
    name="anthropic",
    key="anthropic",
    label="Anthropic cache",
    description="Anthropic's cache: 3 agent breakpoints, prefixes from 1,024 tokens, 5-minute TTL, writes at 1.25x",
    count=count,
    count_runs=count,  # runs apart in the prefix numbers (``RunCalls.prefix_codes``), so calls of two runs share no entry
    needs=(SEQUENCES, TIMES),
    writes=True,
    write_premium=WRITE_PREMIUM,
)
