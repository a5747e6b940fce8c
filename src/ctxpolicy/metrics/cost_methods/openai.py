"""``openai``: OpenAI's automatic prompt caching. A call is served from the cache only from a
shared prefix of at least 1,024 tokens, and then in 128-token increments beyond it: the ideal
cache's shared prefix (``exact``, rescaled to server tokens, unrounded) cut to 1,024 + 128·n.
No write premium (OpenAI bills no cache writes); the cache's lifetime (minutes of inactivity) is
not modelled: every earlier prefix of the run counts as still cached."""

from __future__ import annotations

import numpy as np

from ctxpolicy.metrics.cost_methods.base import SEQUENCES, CostMethod, Counts, RunCalls

MIN_PREFIX = 1024
INCREMENT = 128


def openai_cached(shared: np.ndarray) -> np.ndarray:
    """Server tokens served from a shared prefix of ``shared`` server tokens."""
    shared = np.asarray(shared, dtype=np.int64)
    steps = (shared - MIN_PREFIX) // INCREMENT
    return np.where(shared >= MIN_PREFIX, MIN_PREFIX + steps * INCREMENT, 0)


def count(calls: RunCalls, block: int) -> Counts:
    return Counts(openai_cached(calls.ideal_shared()))


METHOD = CostMethod(
    name="openai",
    key="openai",
    label="OpenAI cache",
    description="OpenAI's automatic cache: shared prefixes from 1,024 tokens, in 128-token increments",
    count=count,
    count_runs=count,
    needs=(SEQUENCES,),
)
