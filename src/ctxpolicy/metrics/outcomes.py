"""Run outcome classes for the outcome breakdown, in priority order.

success (the benchmark's verdict says resolved) > time_limited > step_limited >
submitted_unsuccessful > other (errors, format-error and context limits, missing verdicts on
unsubmitted runs; planned attempts without any run, in the planned-attempt breakdown). A run
ended by a resource limit counts as a success only when its verdict says so; a missing verdict
is unresolved. A benchmark harness that stopped an unresolved run for time (Terminal-Bench's
``failure_mode: agent_timeout``, Harbor's agent timeout, recorded in the verdict's report) makes
it time_limited even where the agent itself recorded no limit; a verifier that ran out of time
(``test_timeout``) stopped the tests, not the agent, and does not.
"""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

OUTCOME_CLASSES = ("success", "time_limited", "step_limited", "submitted_unsuccessful", "other")
MISSING = "other"  # a planned attempt without a run counts here (other/missing)


# terminal-bench's failure modes (terminal_bench.agents.failure_mode.FailureMode) that stop the
# agent for time: the harness's agent timeout. ``test_timeout`` is the verifier's own limit.
AGENT_TIMEOUT_MODES = frozenset({"agent_timeout"})


def harness_timed_out(verdict: dict | None) -> bool:
    """Whether the grading harness says it stopped the agent for time: ``report.time_limited``
    (Harbor's agent timeout, ``ctxpolicy.benchmarks.harbor``) or a terminal-bench
    ``report.failure_mode`` in ``AGENT_TIMEOUT_MODES``; a verifier timeout is not one."""
    report = (verdict or {}).get("report")
    if not isinstance(report, dict):
        return False
    if report.get("time_limited") is True:
        return True
    mode = report.get("failure_mode")
    return isinstance(mode, str) and mode.lower() in AGENT_TIMEOUT_MODES


AGENT_TIME_LIMIT = "time_limit"  # run.json outcome: the agent's own wall-time limit stopped it


def is_time_limited(outcome: str | None, harness_timeout: bool = False) -> bool:
    """The one definition of a time-limited run for resource comparisons (the runs table's
    ``time_limited`` column; A.5): the agent's time limit stopped it (outcome ``time_limit``)
    or the benchmark's harness did (``harness_timed_out``: Terminal-Bench's task timeout, where
    the agent may have recorded ``submitted``), whatever the verdict. Such runs count in the
    resolve rate and are left out of token, latency and cost comparisons."""
    return outcome == AGENT_TIME_LIMIT or bool(harness_timeout)


def time_limited(runs: pd.DataFrame) -> pd.Series:
    """The runs table's ``time_limited`` column as booleans (``is_time_limited``); a table
    written before the column existed falls back to the agent's outcome alone."""
    agent = runs["outcome"].astype("object") == AGENT_TIME_LIMIT
    if "time_limited" not in runs:
        return agent.astype(bool)
    column = runs["time_limited"].astype("object")
    return column.where(column.notna(), agent).astype(bool)


def outcome_class(outcome: str | None, resolved: bool, harness_timeout: bool = False) -> str:
    if resolved:
        return "success"
    if is_time_limited(outcome, harness_timeout):
        return "time_limited"
    if outcome == "step_limit":
        return "step_limited"
    if outcome == "submitted":
        return "submitted_unsuccessful"
    return "other"


def planned_runs_of(runs: pd.DataFrame, tasks: Iterable[str], attempts: int) -> pd.DataFrame:
    """The runs that fill a planned attempt (task in ``tasks``, attempt 1..``attempts``), one per
    (task, attempt)."""
    planned = {str(t) for t in tasks}
    inside = runs[runs["task_id"].astype(str).isin(planned) & (runs["attempt"] >= 1) & (runs["attempt"] <= attempts)]
    inside = inside.assign(task_id=inside["task_id"].astype(str))
    # drop_duplicates(["task_id", "attempt"]), the two columns looked at alone, not every column
    return inside[~inside[["task_id", "attempt"]].duplicated().to_numpy()]


def planned_outcome_counts(runs: pd.DataFrame, tasks: Iterable[str], attempts: int) -> dict[str, int]:
    """Attempts per outcome class over the planned attempts (``tasks`` × 1..``attempts``), every
    class listed: an attempt with no run counts as ``other`` (other/missing); runs outside the
    plan (another task, an attempt number above ``attempts``) are not counted."""
    planned = {str(t) for t in tasks}
    inside = planned_runs_of(runs, planned, attempts)
    classes = inside["outcome_class"].astype("object").where(inside["outcome_class"].notna(), MISSING)
    counts = classes.astype(str).value_counts()
    out = {c: int(counts.get(c, 0)) for c in OUTCOME_CLASSES}
    out[MISSING] += len(planned) * attempts - len(inside)
    return out
