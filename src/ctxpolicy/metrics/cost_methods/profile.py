"""``measured-profile``: the ideal cache held to what the provider really served.

For a replay of a source run whose calls carry the provider's cached tokens (an imported corpus),
replayed call k is served from the cache no more than the ideal cache allows (``exact``) and no
more than the provider served on call k of the source, rescaled to local counts: the source
served C_k of its P_k server tokens, that is C_k · L_k / P_k of its L_k local ones, and the replay
gets at most that many local tokens (rescaled to its own server prompt). A run that was really
served is its own source: min(exact, measured).

The assumption: a provider's misses (a cold or evicted cache, a request routed to another
server, a prefix under its minimum) belong to the call, not to the content, so the replayed call
would have missed as much. Where it fails: a policy that shortens the prompt can turn a miss into
a hit (a shorter prefix fits a cache that had evicted the longer one) or a hit into a miss (a
prefix under the provider's minimum); a replay with more or fewer agent calls than its source has
no call-by-call profile (no price under this method); and a miss caused by time (a long tool run
past the cache's lifetime) would move with the replay's own timing, which a replay does not have.
"""

from __future__ import annotations

import numpy as np

from ctxpolicy.metrics.cost import floor_block
from ctxpolicy.metrics.cost_methods.base import SEQUENCES, SOURCE, CostMethod, Counts, RunCalls
from ctxpolicy.metrics.segments import run_sums


def count(calls: RunCalls, block: int) -> Counts | None:
    source = calls.source
    if len(source.prompts) != len(calls) or np.isnan(np.asarray(source.reported_cached, dtype=float)).any():
        return None
    return Counts(_capped(calls, block))


def count_runs(calls: RunCalls, block: int) -> Counts:
    """``count`` of several runs (``RunCalls.runs``), the source's calls aligned with the calls:
    NaN for a run whose source lacks a provider count (or whose source calls are NaN, not as many)."""
    reported = np.asarray(calls.source.reported_cached, dtype=float)
    with np.errstate(invalid="ignore"):
        cached = _capped(calls, block).astype(np.float64)
    cached[np.repeat(run_sums(np.isnan(reported), calls.runs) > 0, calls.runs)] = np.nan
    return Counts(cached)


def _capped(calls: RunCalls, block: int) -> np.ndarray:
    source = calls.source
    ideal = calls.ideal_shared()
    local = calls.local_tokens()  # whole numbers: divided as floats, as exactly as a float bincount's
    served_local = np.asarray(source.reported_cached, dtype=float) * source.local / np.maximum(source.prompts, 1)
    cap = np.floor(served_local * calls.prompts / np.maximum(local, 1)).astype(np.int64)
    return floor_block(np.minimum(np.minimum(ideal, cap), calls.prompts), block)


METHOD = CostMethod(
    name="measured-profile",
    key="profile",
    label="measured profile",
    description="the ideal cache, capped per call at what the provider served on the source run's call",
    count=count,
    count_runs=count_runs,
    needs=(SEQUENCES, SOURCE),
)
