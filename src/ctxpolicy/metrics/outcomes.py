"""Run outcome classes for the outcome breakdown, in priority order.

success (the benchmark's verdict says resolved) > time_limited > step_limited >
submitted_unsuccessful > other (errors, format-error and context limits, missing verdicts on
unsubmitted runs; planned attempts without any run, in the planned-attempt breakdown). A run
ended by a resource limit counts as a success only when its verdict says so; a missing verdict
is unresolved.
"""

from __future__ import annotations

OUTCOME_CLASSES = ("success", "time_limited", "step_limited", "submitted_unsuccessful", "other")
MISSING = "other"  # a planned attempt without a run counts here (other/missing)


def outcome_class(outcome: str | None, resolved: bool) -> str:
    if resolved:
        return "success"
    if outcome == "time_limit":
        return "time_limited"
    if outcome == "step_limit":
        return "step_limited"
    if outcome == "submitted":
        return "submitted_unsuccessful"
    return "other"
