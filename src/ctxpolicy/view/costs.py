"""Each agent call's cached and fresh prompt tokens under one cost method (pure).

The numbers come from ``ctxpolicy.metrics.cost``, the one definition of the three methods
(docs/metrics.md, section 3); this module only lays a run's calls out the way those functions
take them and hands back one (cached, fresh) pair per call.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ctxpolicy.metrics.cost import (
    DEFAULT_BLOCK,
    METHODS,
    estimated_cached,
    exact_cached,
    has_otrc,
    unchanged_prefix,
)


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
    if method not in METHODS:
        raise ValueError(f"cost method is {method!r}, not one of {', '.join(METHODS)}")
    agent = [i for i, c in enumerate(calls) if c.get("kind") == "agent"]
    out: list[int | None] = [None] * len(calls)
    if not agent:
        return out
    prompts = np.array([calls[i].get("prompt_tokens") or 0 for i in agent], dtype=np.int64)
    if method == "measured":
        for i in agent:
            value = calls[i].get("cached_tokens")
            out[i] = None if value is None else int(value)
        return out
    if method == "exact":
        token_of = np.asarray(tokens, dtype=np.int64)
        sequences = [np.asarray(codes[i], dtype=np.int64) for i in agent]
        cached = exact_cached(sequences, [token_of[s] for s in sequences], prompts, block)
    else:
        where = [unchanged_prefix(calls[i].get("events") or []) or (-1, -1) for i in agent]
        cached, _ = estimated_cached(
            prompts,
            np.array([has_otrc(calls[i].get("events")) for i in agent], dtype=bool),
            block,
            unchanged_tokens=np.array([w[0] for w in where], dtype=np.int64),
            tokens_before=np.array([w[1] for w in where], dtype=np.int64),
        )
    for i, value in zip(agent, cached):
        out[i] = int(value)
    return out
