"""``measured``: the bill of a run that was really served, the server-reported cached tokens
(unknown for the run if any agent call lacks them)."""

from __future__ import annotations

import numpy as np

from ctxpolicy.metrics.cost_methods.base import REPORTED, CostMethod, Counts, RunCalls


def count(calls: RunCalls, block: int) -> Counts:
    return Counts(np.asarray(calls.reported_cached, dtype=np.float64).astype(np.int64))


def count_runs(calls: RunCalls, block: int) -> Counts:
    return Counts(np.trunc(np.asarray(calls.reported_cached, dtype=np.float64)))  # NaN: not reported


METHOD = CostMethod(
    name="measured",
    key="measured",
    label="measured",
    description="server-reported cached tokens",
    count=count,
    count_runs=count_runs,
    needs=(REPORTED,),
    call_column="cached_tokens",
)
