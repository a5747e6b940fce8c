"""The numbers the study's observations quote, each as one table (``ctxpolicy compare --view``).

Every one but ``fc_peaks`` follows A.5's rule for step comparisons: only the successful planned
attempts on the tasks both FC and the policy solve (⌈2A/3⌉ of A), the values averaged within each
task first, then over those tasks.

* ``calls_latency``: agent calls (summary calls never count, A.6.5) and mean per-call latency of
  each policy relative to FC (Observation 2): the policy's mean over the shared solved tasks / FC's
  mean over the same tasks, with a task-bootstrap interval.
* ``summary_share``: the summary calls' share of the agent's time on solved runs for SU, S, SU-p
  and S-p (Observation 3): the mean over shared solved tasks of the summary-call seconds / the
  same mean of the runs' latency (``compare.LATENCY``: from the agent's start, setup left out).
* ``shared_tokens``: total tokens relative to FC on the shared solved tasks (Observation 3's
  "at or above 0.94× full context"), with a task-bootstrap interval.
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
    LATENCY,
    ratio_with_interval,
    baseline_runs,
    cell_description,
    attempts_in_table,
    planned_runs,
    policy_cells,
    select,
    solved_threshold,
    solved_tasks,
    with_latency,
)

SUMMARY_PRIMITIVES = ("SU", "S", "SU-p", "S-p")
VIEWS = ("calls", "summary-share", "shared-tokens", "compressions")
ID_COLUMNS = ("benchmark", "model", "policy", "setting", "summarizer", "cell")


def _cells(
    runs: pd.DataFrame, model: str, benchmark: str, track: str | None
) -> tuple[pd.DataFrame, list[tuple[str, pd.DataFrame]]]:
    """The pair's FC runs, and (cell, runs) of each other cell (of ``track`` when given): FC's side
    of a comparison is then found once for all cells."""
    selected = select(runs, model=model, benchmark=benchmark)
    base = baseline_runs(selected, FC)
    if base.empty:
        raise ValueError(f"no {FC} runs for model {model!r} on benchmark {benchmark!r}")
    cells = [
        (cell, group)
        for cell, group in policy_cells(selected, exclude=base)
        if track is None or "track" not in group or (group["track"].astype("object") == track).any()
    ]
    return base, cells


def _identity(benchmark: str, model: str, cell: str, group: pd.DataFrame) -> dict:
    described = cell_description(group)
    return {"benchmark": benchmark, "model": model, **{k: described.get(k) for k in ID_COLUMNS[2:5]}, "cell": cell}


def _floats(values: pd.Series) -> pd.Series:
    """A column as float64 with NaN for a missing value (nullable integers and ``pd.NA`` included)."""
    numbers = pd.to_numeric(values.astype("object").where(values.notna(), np.nan), errors="coerce")
    return pd.Series(np.asarray(numbers, dtype=float), index=values.index)


def _attempts(runs: pd.DataFrame, model: str, benchmark: str, attempts: int | None) -> int:
    return attempts or attempts_in_table(select(runs, model=model, benchmark=benchmark))


def _solved(runs: pd.DataFrame, attempts: int) -> pd.Index:
    """The tasks a cell solves (at least ⌈2A/3⌉ successes among attempts 1..A)."""
    solved = solved_tasks(runs, attempts=attempts, solved_min=solved_threshold(attempts), require_all=False)
    return solved[solved].index


def _shared_solved(group: pd.DataFrame, fc_solved: pd.Index, attempts: int) -> pd.Index:
    """The tasks both the cell and FC solve (``fc_solved``: ``_solved`` of FC's runs), sorted."""
    return _solved(group, attempts).intersection(fc_solved).sort_values()


def _successful(runs: pd.DataFrame, attempts: int) -> pd.DataFrame:
    planned = with_latency(planned_runs(runs, attempts))
    return planned[planned["resolved"].to_numpy(dtype=bool)]


def _success_means(runs: pd.DataFrame, attempts: int, columns: dict) -> pd.DataFrame:
    """Per task: the mean of each value over the successful planned attempts (a step comparison's
    first stage, A.5); ``columns`` maps a name to a function of the successful runs."""
    successes = _successful(runs, attempts)
    frame = pd.DataFrame({name: make(successes) for name, make in columns.items()}, index=successes.index)
    return frame.groupby(successes["task_id"].astype(str).to_numpy()).mean()


def _per_call(runs: pd.DataFrame) -> pd.Series:
    calls = _floats(runs["agent_calls"])
    return _floats(runs["agent_latency_s"]) / calls.where(calls > 0)


CALL_VALUES = {"agent_calls": lambda r: _floats(r["agent_calls"]), "per_call_latency_s": _per_call}


def calls_latency(
    runs: pd.DataFrame,
    *,
    model: str,
    benchmark: str,
    track: str | None = None,
    attempts: int | None = None,
    n_boot: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> pd.DataFrame:
    """Per policy cell: ``calls_ratio`` and ``per_call_latency_ratio`` to FC, each est/lo/hi/n_tasks,
    on A.5's step rule: successful attempts on the tasks both solve, task means first."""
    rows = []
    planned = _attempts(runs, model, benchmark, attempts)
    base, cells = _cells(runs, model, benchmark, track)
    fc_solved, theirs = _solved(base, planned), _success_means(base, planned, CALL_VALUES)
    for cell, group in cells:
        tasks = _shared_solved(group, fc_solved, planned)
        mine = _success_means(group, planned, CALL_VALUES)
        counts = resample_counts(len(tasks), n_boot, seed)
        row = {**_identity(benchmark, model, cell, group), "shared_solved_tasks": len(tasks)}
        for name, column in (("calls_ratio", "agent_calls"), ("per_call_latency_ratio", "per_call_latency_s")):
            values = ratio_with_interval(tasks, mine[column], theirs[column], counts)
            row.update({f"{name}_{part}": value for part, value in values.items()})
        rows.append(row)
    return pd.DataFrame(rows)


SHARE_VALUES = {
    "summary_s": lambda r: _floats(r["summary_latency_s"]).fillna(0.0),
    LATENCY: lambda r: _floats(r[LATENCY]),
}


def summary_share(
    runs: pd.DataFrame, *, model: str, benchmark: str, track: str | None = None, attempts: int | None = None
) -> pd.DataFrame:
    """Per cell of SU, S, SU-p or S-p, on the tasks both it and FC solve: the mean over tasks of
    each task's mean summary-call seconds over its successful attempts, divided by the same mean
    of the runs' latency (``compare.LATENCY``, the agent's own time)."""
    rows = []
    planned = _attempts(runs, model, benchmark, attempts)
    base, cells = _cells(runs, model, benchmark, track)
    fc_solved = _solved(base, planned)
    for cell, group in cells:
        if str(group["primitive"].iloc[0]) not in SUMMARY_PRIMITIVES:
            continue
        tasks = _shared_solved(group, fc_solved, planned)
        per_task = _success_means(group, planned, SHARE_VALUES).reindex(tasks).dropna()
        successes = _successful(group, planned)
        summary, latency = float(per_task["summary_s"].mean()), float(per_task[LATENCY].mean())
        rows.append(
            {
                **_identity(benchmark, model, cell, group),
                "shared_solved_tasks": len(per_task),
                "solved_runs": int(successes["task_id"].astype(str).isin(per_task.index).sum()),
                "summary_s": summary if len(per_task) else np.nan,
                LATENCY: latency if len(per_task) else np.nan,
                "summary_share": summary / latency if len(per_task) and latency > 0 else np.nan,
            }
        )
    return pd.DataFrame(rows)


TOKEN_VALUES = {"total_tokens": lambda r: _floats(r["total_tokens"])}


def shared_tokens(
    runs: pd.DataFrame,
    *,
    model: str,
    benchmark: str,
    track: str | None = None,
    attempts: int | None = None,
    n_boot: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> pd.DataFrame:
    """Per policy cell: total tokens (agent and summary calls, prompt and output) relative to FC
    on the tasks both solve: each task's mean over its successful attempts, the policy's mean over
    those tasks / FC's (``tokens_ratio`` est/lo/hi/n_tasks, task bootstrap)."""
    rows = []
    planned = _attempts(runs, model, benchmark, attempts)
    base, cells = _cells(runs, model, benchmark, track)
    fc_solved, theirs = _solved(base, planned), _success_means(base, planned, TOKEN_VALUES)
    for cell, group in cells:
        tasks = _shared_solved(group, fc_solved, planned)
        mine = _success_means(group, planned, TOKEN_VALUES)
        values = ratio_with_interval(
            tasks, mine["total_tokens"], theirs["total_tokens"], resample_counts(len(tasks), n_boot, seed)
        )
        rows.append(
            {
                **_identity(benchmark, model, cell, group),
                "shared_solved_tasks": len(tasks),
                **{f"tokens_ratio_{part}": value for part, value in values.items()},
            }
        )
    return pd.DataFrame(rows)


def compressions_shared(
    runs: pd.DataFrame, *, model: str, benchmark: str, attempts: int | None = None, track: str | None = None
) -> pd.DataFrame:
    """Per policy cell: mean compressions per successful run on the tasks both it and FC solve."""
    rows = []
    planned = _attempts(runs, model, benchmark, attempts)
    values = {"compressions": lambda r: _floats(r["compressions"])}
    base, cells = _cells(runs, model, benchmark, track)
    fc_solved = _solved(base, planned)
    for cell, group in cells:
        shared = _shared_solved(group, fc_solved, planned)
        per_task = _success_means(group, planned, values)["compressions"].reindex(shared)
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
