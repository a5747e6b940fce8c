"""``estimated``: the study's reconstruction (A.5.2) from successive server-reported prompt sizes
and the recorded OTRC events (``metrics.cost.estimated_cached``); the headline by default."""

from __future__ import annotations

import numpy as np

from ctxpolicy.metrics.cost import estimated_cached
from ctxpolicy.metrics.cost_methods.base import CostMethod, Counts, RunCalls


def count(calls: RunCalls, block: int) -> Counts:
    cached, _ = estimated_cached(
        calls.prompts,
        calls.filled("otrc", False).astype(bool),
        block,
        unchanged_tokens=calls.filled("unchanged", -1).astype(np.int64),
        tokens_before=calls.filled("before", -1).astype(np.int64),
        tokens_after=calls.filled("after", -1).astype(np.int64),
        runs=calls.runs,
    )
    return Counts(cached)


METHOD = CostMethod(
    name="estimated",
    key="est",
    label="estimated",
    description="the study's estimate (A.5.2) from server-reported prompt sizes and OTRC events",
    count=count,
    count_runs=count,
    compared=True,
)
