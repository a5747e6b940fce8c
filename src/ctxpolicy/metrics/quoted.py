"""The numbers the study's observations quote, each as one table (``ctxpolicy compare --view``).

* ``calls_latency``: agent calls and mean per-call latency of each policy relative to FC
  (Observation 2): resource-eligible runs (``compare.resource_eligible``), per-task means,
  policy mean over the tasks both sides measured / FC's mean over the same tasks (A.5's ratios).
* ``summary_share``: the summary calls' share of wall-clock time on solved runs for SU, S, SU-p
  and S-p (Observation 3): a ratio of sums over the policy's resolved runs, Σ summary-call
  latency / Σ run wall time, so a long run weighs by its length, as a share of time spent does.
* ``compressions_shared``: compressions per run on tasks both FC and the policy solve
  (Observation 3): the policy's successful attempts on tasks solved by both (⌈2A/3⌉ of A), a mean
  per task, then the mean over tasks; a compression is one firing (a call with events).
* ``fc_peaks``: the peak prompt tokens of each FC run with a recorded peak (A.4's peak-context
  distribution, the one calibration reads), and ``share_above`` the fraction of those peaks
  strictly above each threshold (the runs a policy at that threshold would compress).

Definitions: docs/metrics.md, section 5.6. Pure functions of the runs table.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ctxpolicy.metrics.bootstrap import DEFAULT_RESAMPLES, resample_counts
from ctxpolicy.metrics.compare import (
    FC,
    _ratio_with_interval,
    baseline_runs,
    cell_description,
    attempts_in_table,
    planned_runs,
    policy_cells,
    resource_eligible,
    select,
    solved_threshold,
    solved_tasks,
)

SUMMARY_PRIMITIVES = ("SU", "S", "SU-p", "S-p")
VIEWS = ("calls", "summary-share", "compressions")
ID_COLUMNS = ("benchmark", "model", "policy", "setting", "summarizer", "cell")


def _cells(runs: pd.DataFrame, model: str, benchmark: str, track: str | None):
    selected = select(runs, model=model, benchmark=benchmark)
    base = baseline_runs(selected, FC)
    if base.empty:
        raise ValueError(f"no {FC} runs for model {model!r} on benchmark {benchmark!r}")
    for cell, group in policy_cells(selected, exclude=base):
        if track is not None and "track" in group and (group["track"].astype("object") != track).all():
            continue
        yield cell, group, base


def _identity(benchmark: str, model: str, cell: str, group: pd.DataFrame) -> dict:
    described = cell_description(group)
    return {"benchmark": benchmark, "model": model, **{k: described.get(k) for k in ID_COLUMNS[2:5]}, "cell": cell}


def _floats(values: pd.Series) -> pd.Series:
    """A column as float64 with NaN for a missing value (nullable integers and ``pd.NA`` included)."""
    numbers = pd.to_numeric(values.astype("object").where(values.notna(), np.nan), errors="coerce")
    return pd.Series(np.asarray(numbers, dtype=float), index=values.index)


def _per_call_means(runs: pd.DataFrame) -> pd.DataFrame:
    eligible = resource_eligible(runs)
    calls = _floats(eligible["agent_calls"])
    per_call = _floats(eligible["agent_latency_s"]) / calls.where(calls > 0)
    frame = pd.DataFrame({"agent_calls": calls, "per_call_latency_s": per_call})
    return frame.groupby(eligible["task_id"].astype(str).to_numpy()).mean()


def calls_latency(
    runs: pd.DataFrame,
    *,
    model: str,
    benchmark: str,
    track: str | None = None,
    n_boot: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> pd.DataFrame:
    """Per policy cell: ``calls_ratio`` and ``per_call_latency_ratio`` to FC, each est/lo/hi/n_tasks."""
    rows = []
    for cell, group, base in _cells(runs, model, benchmark, track):
        mine, theirs = _per_call_means(group), _per_call_means(base)
        tasks = mine.index.intersection(theirs.index).sort_values()
        counts = resample_counts(len(tasks), n_boot, seed)
        row = _identity(benchmark, model, cell, group)
        for name, column in (("calls_ratio", "agent_calls"), ("per_call_latency_ratio", "per_call_latency_s")):
            values = _ratio_with_interval(tasks, mine[column], theirs[column], counts)
            row.update({f"{name}_{part}": value for part, value in values.items()})
        rows.append(row)
    return pd.DataFrame(rows)


def summary_share(runs: pd.DataFrame, *, model: str, benchmark: str, track: str | None = None) -> pd.DataFrame:
    """Per cell of SU, S, SU-p or S-p: Σ summary-call seconds / Σ wall seconds over its resolved runs."""
    rows = []
    for cell, group, _ in _cells(runs, model, benchmark, track):
        if str(group["primitive"].iloc[0]) not in SUMMARY_PRIMITIVES:
            continue
        solved = group[group["resolved"].to_numpy(dtype=bool)]
        wall = float(_floats(solved["wall_s"]).sum())
        summary = float(_floats(solved["summary_latency_s"]).fillna(0.0).sum())
        rows.append(
            {
                **_identity(benchmark, model, cell, group),
                "solved_runs": len(solved),
                "summary_s": summary,
                "wall_s": wall,
                "summary_share": summary / wall if wall > 0 else np.nan,
            }
        )
    return pd.DataFrame(rows)


def _compressions_when_solved(runs: pd.DataFrame, attempts: int) -> pd.Series:
    planned = planned_runs(runs, attempts)
    successes = planned[planned["resolved"].to_numpy(dtype=bool)]
    return _floats(successes["compressions"]).groupby(successes["task_id"].astype(str).to_numpy()).mean()


def compressions_shared(
    runs: pd.DataFrame, *, model: str, benchmark: str, attempts: int | None = None, track: str | None = None
) -> pd.DataFrame:
    """Per policy cell: mean compressions per successful run on the tasks both it and FC solve."""
    rows = []
    for cell, group, base in _cells(runs, model, benchmark, track):
        planned = attempts or attempts_in_table(select(runs, model=model, benchmark=benchmark))
        needed = solved_threshold(planned)
        mine = solved_tasks(group, attempts=planned, solved_min=needed, require_all=False)
        theirs = solved_tasks(base, attempts=planned, solved_min=needed, require_all=False)
        shared = mine[mine].index.intersection(theirs[theirs].index).sort_values()
        per_task = _compressions_when_solved(group, planned).reindex(shared)
        rows.append(
            {
                **_identity(benchmark, model, cell, group),
                "shared_solved_tasks": len(shared),
                "compressions_per_run": float(per_task.mean()) if len(shared) else np.nan,
            }
        )
    return pd.DataFrame(rows)


def fc_peaks(runs: pd.DataFrame, *, model: str, benchmark: str) -> pd.DataFrame:
    """One row per FC run of the pair with a recorded ``peak_prompt_tokens``: task, attempt,
    outcome and the peak (tokens), sorted by the peak."""
    base = baseline_runs(select(runs, model=model, benchmark=benchmark), FC)
    if base.empty:
        raise ValueError(f"no {FC} runs for model {model!r} on benchmark {benchmark!r}")
    peaks = _floats(base["peak_prompt_tokens"])
    known = base[peaks.notna()]
    columns = [c for c in ("task_id", "attempt", "outcome") if c in known]
    out = known[columns].copy()
    out["peak_prompt_tokens"] = peaks[peaks.notna()]
    out.insert(0, "model", model)
    out.insert(0, "benchmark", benchmark)
    return out.sort_values(["peak_prompt_tokens", *columns], kind="stable").reset_index(drop=True)


def share_above(peaks: pd.Series, thresholds: dict[str, float]) -> dict[str, float]:
    """Per threshold setting: the fraction of ``peaks`` strictly above its tokens (NaN without peaks)."""
    values = _floats(peaks).dropna().to_numpy(dtype=float)
    return {
        setting: float((values > float(tokens)).mean()) if len(values) else np.nan
        for setting, tokens in thresholds.items()
    }
