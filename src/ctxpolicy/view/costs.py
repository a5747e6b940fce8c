"""Each agent call's cached and fresh prompt tokens under one cost method (pure).

The numbers come from ``ctxpolicy.metrics.cost_methods``, the one table of the cost methods
(docs/metrics.md, section 3); this module only lays a run's calls out the way those functions
take them and hands back one (cached, fresh) pair per call.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ctxpolicy.metrics import cost_methods
from ctxpolicy.metrics.cost import DEFAULT_BLOCK
from ctxpolicy.metrics.cost_methods.base import Sequences, run_calls_of


def call_cached(
    calls: Sequence[dict],
    codes: Sequence[Sequence[int]],
    tokens: Sequence[int],
    method: str,
    block: int = DEFAULT_BLOCK,
) -> list[int | None]:
    """Cached prompt tokens of every call under ``method`` (None for summary calls, which are billed
    fresh, and wherever the method cannot say: ``measured`` without the server's count).

    ``codes[i]`` are the message codes call i sent (equal codes, equal messages) and ``tokens[c]``
    the local token count of message c (used by ``exact``)."""
    entry = cost_methods.method(method)  # ValueError naming the allowed ones
    agent = [i for i, c in enumerate(calls) if c.get("kind") == "agent"]
    out: list[int | None] = [None] * len(calls)
    if not agent:
        return out
    token_of = np.asarray(tokens, dtype=np.int64)
    sequences = [np.asarray(codes[i], dtype=np.int64) for i in agent]
    run_calls = run_calls_of([calls[i] for i in agent], Sequences.of(sequences, [token_of[s] for s in sequences]))
    if entry.call_column == "cached_tokens":  # per call, as reported (a run may lack some)
        for i in agent:
            value = calls[i].get("cached_tokens")
            out[i] = None if value is None else int(value)
        return out
    counts = entry.counts(run_calls, block)
    if counts is None:
        return out
    for i, value in zip(agent, counts.cached):
        out[i] = int(value)
    return out
