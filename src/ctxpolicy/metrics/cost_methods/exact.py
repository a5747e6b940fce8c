"""``exact``: the ideal prefix cache. The longest whole-message prefix an agent call shares with
any earlier agent call, measured in local cl100k_base counts and rescaled to the call's
server-reported prompt (``metrics.cost.exact_cached_flat``)."""

from __future__ import annotations

from ctxpolicy.metrics.cost import floor_block
from ctxpolicy.metrics.cost_methods.base import SEQUENCES, CostMethod, Counts, RunCalls


def count(calls: RunCalls, block: int) -> Counts:
    return Counts(floor_block(calls.ideal_shared(), block))  # = exact_cached_flat(..., block)


METHOD = CostMethod(
    name="exact",
    key="exact",
    label="exact",
    description="prefix-cache simulation over whole messages, local cl100k_base shares rescaled to server tokens",
    count=count,
    count_runs=count,
    needs=(SEQUENCES,),
    compared=True,
)
