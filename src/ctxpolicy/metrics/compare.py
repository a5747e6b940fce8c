"""Comparisons of policy cells against a baseline cell (FC unless told) on one model and benchmark.

All functions take the runs table (docs/schema.md) and return tidy DataFrames. A policy is
identified by its cell (policy spec, threshold setting, summarizer). The rules are spelled out
in docs/metrics.md (section 5); each is one small function here.

``compare_to_baseline`` is the one comparison behind ``ctxpolicy compare`` and the figures'
data: one row per cell with ``COMPARE_KEYS`` (the command's keys; an interval statistic
``<key>`` is the columns ``<key>_est``, ``_lo``, ``_hi`` and ``_n_tasks``): one name per number,
the figures read it too.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterable
from itertools import combinations

import numpy as np
import pandas as pd

from ctxpolicy.metrics.bootstrap import DEFAULT_RESAMPLES, boot_means, boot_ratio, percentile_interval, resample_counts
from ctxpolicy.metrics import cost_methods
from ctxpolicy.metrics.cost_methods import DEFAULT as DEFAULT_METHOD
from ctxpolicy.metrics.outcomes import OUTCOME_CLASSES, planned_outcome_counts, planned_runs_of, time_limited

FC = "FC"
CELL_COLUMNS = ("policy", "primitive", "trigger", "depth", "setting", "summarizer")
IDENTITY_KEYS = ("benchmark", "model", "policy", "setting", "summarizer")
# interval statistics: est, lo, hi, n_tasks (resolve_delta has no n_tasks: it is over n_tasks)
INTERVAL_KEYS = ("resolve_delta", "tokens_ratio", "latency_ratio", "cost_ratio", "calls_change")
COMPARE_KEYS = (
    "n_tasks",
    "resolve_rate",
    "baseline_resolve_rate",
    "resolve_delta",
    "tokens_ratio",
    "latency_ratio",
    "cost_ratio",
    "solved",
    "baseline_solved",
    "gains",
    "losses",
    "calls_change",
    "left_out_tasks",
)


def ratio_columns() -> dict[str, str]:
    """Ratio name -> runs column; cost_ratio is the headline method's (``compare_to_baseline``),
    ``cost_ratio_{method}`` one per method of the cost-method registry."""
    return {
        "tokens_ratio": "total_tokens",
        "latency_ratio": "agent_time_s",
        **{f"cost_ratio_{method}": column for method, column in cost_methods.billed_columns().items()},
        "calls_ratio": "agent_calls",
        "retrieval_ratio": "retrieval_cmds",
        "execution_ratio": "execution_cmds",
    }


RATIOS = ratio_columns()  # for the registry's own methods


LATENCY = "agent_time_s"  # A.5's latency: the agent's start to the run's end (records.agent_time)


def with_latency(runs: pd.DataFrame) -> pd.DataFrame:
    """``runs`` with the latency column (``LATENCY``); a table written before it existed (or read
    into today's columns, the column empty) gets ``wall_s`` in its place: its records say nothing
    of a setup time. (A value is missing in a new table only where ``wall_s`` is too.)"""
    if LATENCY not in runs:
        return runs.assign(**{LATENCY: runs["wall_s"]})
    if runs[LATENCY].isna().any() and "wall_s" in runs:
        own, wall = (_seconds(runs[c]) for c in (LATENCY, "wall_s"))
        return runs.assign(**{LATENCY: np.where(np.isnan(own), wall, own)})
    return runs


def _seconds(values: pd.Series) -> np.ndarray:
    return pd.to_numeric(values.astype("object"), errors="coerce").to_numpy(dtype=float, na_value=np.nan)


# Tracks whose runs are not attempts at a task: a proxied conversation, a replayed trajectory.
# They never count for resolve rates, planned attempts or the baseline; ``select`` leaves them out.
NON_STUDY_TRACKS = ("proxy", "replay", "imported")


# -- selection ---------------------------------------------------------------------------


def study_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs that are attempts at a task (every track but ``NON_STUDY_TRACKS``)."""
    if "track" not in runs:
        return runs
    return runs[~runs["track"].astype("object").isin(NON_STUDY_TRACKS).to_numpy()]


def select(
    runs: pd.DataFrame, *, model: str | None = None, benchmark: str | None = None, cohort: str | None = None
) -> pd.DataFrame:
    """The study's runs (``study_runs``) of one model, benchmark and cohort (None: any)."""
    runs = study_runs(runs)
    mask = np.ones(len(runs), dtype=bool)
    for column, value in (("model", model), ("benchmark", benchmark), ("cohort", cohort)):
        if value is not None:
            mask &= (runs[column] == value).to_numpy()
    return runs[mask]


def fc_runs(runs: pd.DataFrame) -> pd.DataFrame:
    return runs[(runs["policy"] == FC).to_numpy()]


def baseline_runs(runs: pd.DataFrame, baseline: str = FC, setting: str | None = None) -> pd.DataFrame:
    """The baseline cell's runs: policy ``baseline`` with the agent as its own summarizer, at
    ``setting`` when the policy has one. ValueError when that matches several cells."""
    mask = (runs["policy"].astype("object") == baseline).to_numpy().copy()
    if "summarizer" in runs:
        mask &= runs["summarizer"].isna().to_numpy()
    if setting is not None and "setting" in runs:
        values = runs["setting"].astype("object")
        mask &= (values.isna() | (values == setting)).to_numpy()
    chosen = runs[mask]
    cells = sorted(map(str, chosen["cell"].unique()))
    if len(cells) > 1:
        raise ValueError(f"baseline {baseline!r} matches several cells ({', '.join(cells)}); name a setting")
    return chosen


def policy_cells(runs: pd.DataFrame, exclude: pd.DataFrame | None = None) -> list[tuple[str, pd.DataFrame]]:
    """(cell, runs) for every cell that is not FC (or not one of ``exclude``'s cells), in cell order."""
    if exclude is None:
        others = runs[(runs["policy"] != FC).to_numpy()]
    else:
        others = runs[~runs["cell"].astype("object").isin(set(exclude["cell"].astype("object"))).to_numpy()]
    return [(str(cell), group) for cell, group in others.groupby("cell", observed=True, sort=True)]


def cell_description(group: pd.DataFrame) -> dict:
    first = group.iloc[0]
    return {c: (None if pd.isna(first[c]) else first[c]) for c in CELL_COLUMNS if c in group}


# -- attempts and tasks --------------------------------------------------------------------


def attempts_in_table(runs: pd.DataFrame) -> int:
    """Attempts per task when only a table is at hand: the largest attempt number in it."""
    return int(runs["attempt"].max()) if len(runs) else 1


def solved_threshold(attempts: int) -> int:
    """Successes that make a task solved: at least two thirds of the attempts, ⌈2A/3⌉ (2 of 3, 1 of 1)."""
    return -(-2 * attempts // 3)


def planned_runs(runs: pd.DataFrame, attempts: int) -> pd.DataFrame:
    """The runs of planned attempts 1..A, one per (benchmark, model, cell, task, attempt) (the
    first when repeated)."""
    attempt = runs["attempt"].to_numpy()
    key = [c for c in ("benchmark", "model", "cell") if c in runs] + ["task_id", "attempt"]
    keep = (attempt >= 1) & (attempt <= attempts)
    # drop_duplicates(key) of those, the key's columns looked at alone (it walks every column of
    # the table) and the wide table cut once
    keep[keep] = ~runs[key][keep].duplicated().to_numpy()
    return runs[keep]


def comparison_tasks(policy: pd.DataFrame, baseline: pd.DataFrame) -> pd.Index:
    """The tasks a comparison counts: those with any run in either cell when both cells run the
    same cohort; otherwise (a sweep subset against the main cohort's baseline) the policy's."""
    tasks = pd.Index(policy["task_id"].astype(str).unique())
    if _same_cohort(policy, baseline):
        tasks = tasks.union(pd.Index(baseline["task_id"].astype(str).unique()))
    return tasks.sort_values()


def _same_cohort(a: pd.DataFrame, b: pd.DataFrame) -> bool:
    if "cohort" not in a or "cohort" not in b:
        return True
    cohorts_a, cohorts_b = (set(map(str, t["cohort"].dropna().unique())) for t in (a, b))  # each value once
    return not cohorts_a or not cohorts_b or cohorts_a == cohorts_b


def _attempt_counts(planned: pd.DataFrame) -> pd.DataFrame:
    """Per task of ``planned_runs``: recorded planned attempts and their successes."""
    grouped = planned["resolved"].groupby(planned["task_id"].astype(str))
    return pd.DataFrame({"recorded": grouped.size(), "successes": grouped.sum().astype(int)})


# -- per-task values ---------------------------------------------------------------------


def task_success(runs: pd.DataFrame, attempts: int | None = None) -> pd.Series:
    """Each task's success fraction over the planned attempts: successes among attempts 1..A,
    divided by A (a missing attempt counts as unresolved). A defaults to the table's largest
    attempt number."""
    attempts = attempts or attempts_in_table(runs)
    return _success_of(_attempt_counts(planned_runs(runs, attempts)), attempts)


def _success_of(counts: pd.DataFrame, attempts: int) -> pd.Series:
    return (counts["successes"] / attempts).astype(float)


def resource_eligible(runs: pd.DataFrame) -> pd.DataFrame:
    """Runs that count for resource ratios: not time-limited (``metrics.outcomes.time_limited``:
    the agent's limit or the harness's timeout, whatever the verdict; A.5), at least two prompt
    counts."""
    return runs[((~time_limited(runs)) & (runs["n_prompt_counts"] >= 2)).to_numpy()]


def task_resource_means(runs: pd.DataFrame, column: str) -> pd.Series:
    """Per-task mean of one resource over eligible runs that have a value for it."""
    return task_resource_means_of(runs, [column])[column]


def task_resource_means_of(runs: pd.DataFrame, columns: list[str]) -> dict[str, pd.Series]:
    """``task_resource_means`` of several columns, the runs grouped once. Each column is averaged
    on its own: a frame's mean can differ from a column's in the last bit."""
    eligible = _eligible_of(runs, columns)
    grouped = eligible.groupby(eligible["task_id"].astype(str))
    return {column: grouped[column].mean().dropna() for column in dict.fromkeys(columns)}


def _eligible_of(runs: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """``resource_eligible(runs)`` holding only the task id, ``columns`` and what the rule reads:
    the rows of a wide table are cut once, in a few columns."""
    read = ("task_id", "outcome", "time_limited", "n_prompt_counts", *columns)
    return resource_eligible(runs[[c for c in dict.fromkeys(read) if c in runs]])


def resource_means(runs: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """Per-task means of resource columns over eligible runs (NaN where none has a value)."""
    eligible = _eligible_of(runs, columns)
    return eligible.groupby(eligible["task_id"].astype(str))[columns].mean()


def resolve_rate(runs: pd.DataFrame, attempts: int | None = None) -> float:
    """Mean over tasks of each task's success fraction over the planned attempts."""
    per_task = task_success(runs, attempts)
    return float(per_task.mean()) if len(per_task) else float("nan")


def resolve_rate_interval(
    runs: pd.DataFrame, *, attempts: int | None = None, n_boot: int = DEFAULT_RESAMPLES, seed: int = 0
) -> dict:
    """One cell's resolve rate over its planned attempts with a 95 % task-bootstrap interval
    (fractions): ``n_tasks``, ``resolve_rate_est``, ``resolve_rate_lo``, ``resolve_rate_hi``."""
    per_task = task_success(runs, attempts).sort_index()
    lo, hi = percentile_interval(boot_means(resample_counts(len(per_task), n_boot, seed), per_task.to_numpy(float)))
    return {
        "n_tasks": len(per_task),
        "resolve_rate_est": resolve_rate(runs, attempts),
        "resolve_rate_lo": lo,
        "resolve_rate_hi": hi,
    }


def resource_ratio(policy: pd.DataFrame, fc: pd.DataFrame, column: str) -> tuple[float, int]:
    """Policy mean over tasks measured on both sides / FC mean over the same tasks."""
    a, b = task_resource_means(policy, column), task_resource_means(fc, column)
    shared = a.index.intersection(b.index)
    if len(shared) == 0 or b[shared].mean() == 0:
        return float("nan"), len(shared)
    return float(a[shared].mean() / b[shared].mean()), len(shared)


def solved_tasks(
    runs: pd.DataFrame, *, attempts: int | None = None, solved_min: int | None = None, require_all: bool = True
) -> pd.Series:
    """Per task: solved (bool) when at least ``solved_min`` (default ⌈2A/3⌉) of the planned
    attempts 1..A succeed. With ``require_all`` (the gains/losses rule), tasks without all A
    attempts recorded are left out."""
    attempts = attempts or attempts_in_table(runs)
    solved_min = solved_min or solved_threshold(attempts)
    return _solved_of(_attempt_counts(planned_runs(runs, attempts)), attempts, solved_min, require_all)


def _solved_of(counts: pd.DataFrame, attempts: int, solved_min: int, require_all: bool = True) -> pd.Series:
    if require_all:
        counts = counts[counts["recorded"] >= attempts]
    return counts["successes"] >= solved_min


def calls_when_solved(runs: pd.DataFrame, attempts: int, solved_min: int) -> pd.Series:
    """Per solved task (at least ``solved_min`` successes among attempts 1..A): the mean agent
    calls of its successful attempts."""
    return _calls_of(planned_runs(runs, attempts), solved_min)


def _calls_of(planned: pd.DataFrame, solved_min: int) -> pd.Series:
    successes = planned[planned["resolved"].to_numpy(dtype=bool)]
    grouped = successes["agent_calls"].groupby(successes["task_id"].astype(str))
    mean = grouped.mean().rename("mean")  # agg(["size", "mean"])'s column, without its slow path
    return mean[(grouped.size() >= solved_min).to_numpy()]


def ratio_with_interval(tasks: pd.Index, policy: pd.Series, base: pd.Series, counts: np.ndarray) -> dict:
    """A.5's ratio over ``tasks``: the policy's mean / the baseline's mean over the tasks where
    both per-task values are known (a task missing or NaN on either side counts on neither),
    with its task-bootstrap interval (``counts`` from ``resample_counts(len(tasks), …)``)."""
    return _ratio_interval(policy.reindex(tasks).to_numpy(float), base.reindex(tasks).to_numpy(float), counts)


def _ratio_interval(pa: np.ndarray, pb: np.ndarray, counts: np.ndarray) -> dict:
    """``ratio_with_interval`` of per-task values already laid out in the tasks' order."""
    both = ~np.isnan(pa) & ~np.isnan(pb)
    base_mean = pb[both].mean() if both.any() else np.nan
    point = pa[both].mean() / base_mean if both.any() and base_mean > 0 else np.nan
    lo, hi = percentile_interval(boot_ratio(counts, pa, pb, both))
    return {"est": float(point), "lo": lo, "hi": hi, "n_tasks": int(both.sum())}


def _interval(name: str, values: dict) -> dict:
    return {f"{name}_{part}": value for part, value in values.items()}


# -- the comparison ------------------------------------------------------------------------


def compare_to_baseline(
    runs: pd.DataFrame,
    *,
    model: str,
    benchmark: str,
    baseline: str = FC,
    baseline_setting: str | None = None,
    attempts: int | None = None,
    cost_method: str = DEFAULT_METHOD,
    cohort: str | None = None,
    track: str | None = None,
    n_boot: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> pd.DataFrame:
    """One row per cell other than the baseline's (only ``track``'s cells when given), on one
    model and benchmark.

    Columns: the cell's identity (``IDENTITY_KEYS``, ``cell``, ``track``, ``primitive``,
    ``trigger``, ``depth``), ``attempts``, ``baseline``, then ``COMPARE_KEYS`` with interval
    statistics flattened to ``<key>_est/_lo/_hi/_n_tasks`` (and ``cost_ratio_method``, the
    method of ``cost_ratio``), the gained and lost task ids (``gain_tasks``, ``loss_tasks``),
    and the further ratios of ``RATIOS`` (each method's cost, calls, retrieval and execution
    commands) in the same form. Rates and differences are fractions; ratios plain ratios;
    ``calls_change`` = ratio - 1. Attempts default to the table's largest attempt number.
    ValueError without baseline runs.
    """
    cost_methods.method(cost_method)  # the one check of a method name
    columns_of_ratios = ratio_columns()
    missing = [c for c in columns_of_ratios.values() if c not in runs]  # a table from before a method existed
    runs = runs.assign(**dict.fromkeys(missing, np.nan)) if missing else runs
    selected = with_latency(select(runs, model=model, benchmark=benchmark, cohort=cohort))
    attempts = attempts or attempts_in_table(selected)
    solved_min = solved_threshold(attempts)
    base = baseline_runs(selected, baseline, baseline_setting)
    if base.empty:
        raise ValueError(f"no {baseline} runs for model {model!r} on benchmark {benchmark!r}")
    columns = list(columns_of_ratios.values())
    # each cell's planned runs are found once and its three per-task values read from them
    base_planned = planned_runs(base, attempts)
    base_counts = _attempt_counts(base_planned)
    base_success = _success_of(base_counts, attempts)
    base_means = resource_means(base, columns)
    base_solved = _solved_of(base_counts, attempts, solved_min)
    base_calls = _calls_of(base_planned, solved_min)
    rows = []
    for cell, group in policy_cells(selected, exclude=base):
        if track is not None and "track" in group and (group["track"].astype("object") != track).all():
            continue
        tasks = comparison_tasks(group, base)
        counts = resample_counts(len(tasks), n_boot, seed)
        planned = planned_runs(group, attempts)
        attempt_counts = _attempt_counts(planned)
        a = _success_of(attempt_counts, attempts).reindex(tasks, fill_value=0.0).to_numpy(float)
        b = base_success.reindex(tasks, fill_value=0.0).to_numpy(float)
        lo, hi = percentile_interval(boot_means(counts, a - b))
        row = {
            "benchmark": benchmark,
            "model": model,
            **cell_description(group),
            "cell": cell,
            "track": group["track"].iloc[0] if "track" in group else None,
            "attempts": attempts,
            "baseline": baseline,
            "n_tasks": len(tasks),
            "resolve_rate": float(a.mean()) if len(tasks) else np.nan,
            "baseline_resolve_rate": float(b.mean()) if len(tasks) else np.nan,
        }
        row.update(
            _interval("resolve_delta", {"est": float((a - b).mean()) if len(tasks) else np.nan, "lo": lo, "hi": hi})
        )
        # every ratio's per-task means laid out on the tasks once (ratio_with_interval's reindex)
        means, on_tasks = resource_means(group, columns).reindex(tasks), base_means.reindex(tasks)
        ratios = {
            name: _ratio_interval(means[column].to_numpy(float), on_tasks[column].to_numpy(float), counts)
            for name, column in columns_of_ratios.items()
        }
        row.update(_interval("tokens_ratio", ratios["tokens_ratio"]))
        row.update(_interval("latency_ratio", ratios["latency_ratio"]))
        row.update(_interval("cost_ratio", ratios[f"cost_ratio_{cost_method}"]), cost_ratio_method=cost_method)
        row.update(_gains_losses(_solved_of(attempt_counts, attempts, solved_min), base_solved, tasks))
        row.update(_interval("calls_change", _calls_change(_calls_of(planned, solved_min), base_calls, n_boot, seed)))
        for name, values in ratios.items():
            if name not in ("tokens_ratio", "latency_ratio"):
                row.update(_interval(name, values))
        rows.append(row)
    return pd.DataFrame(rows)


def _gains_losses(policy: pd.Series, base: pd.Series, tasks: pd.Index) -> dict:
    """Gains and losses over the comparison's tasks that have every planned attempt on both sides."""
    compared = tasks.intersection(policy.index).intersection(base.index)
    p, f = policy[compared].to_numpy(bool), base[compared].to_numpy(bool)
    return {
        "solved": int(p.sum()),
        "baseline_solved": int(f.sum()),
        "gains": int((p & ~f).sum()),
        "losses": int((~p & f).sum()),
        "left_out_tasks": len(tasks) - len(compared),
        "gains_losses_tasks": len(compared),
        "gain_tasks": list(map(str, compared[p & ~f])),
        "loss_tasks": list(map(str, compared[~p & f])),
    }


def _calls_change(policy: pd.Series, base: pd.Series, n_boot: int, seed: int) -> dict:
    """Agent calls on tasks both solve: policy mean / baseline mean - 1, with a task-bootstrap interval."""
    tasks = policy.index.intersection(base.index).sort_values()
    a, b = policy[tasks].to_numpy(float), base[tasks].to_numpy(float)
    if not len(tasks) or b.mean() <= 0:
        return {"est": np.nan, "lo": np.nan, "hi": np.nan, "n_tasks": len(tasks)}
    ratios = boot_ratio(resample_counts(len(tasks), n_boot, seed), a, b, np.ones(len(tasks), dtype=bool))
    lo, hi = percentile_interval(ratios - 1)
    return {"est": float(a.mean() / b.mean() - 1), "lo": lo, "hi": hi, "n_tasks": len(tasks)}


def compare_records(table: pd.DataFrame) -> list[dict]:
    """``compare_to_baseline`` rows as the command's JSON objects: the identity keys and
    ``COMPARE_KEYS``, each interval statistic as {est, lo, hi, n_tasks} (``cost_ratio`` also
    names its ``method``), NaN as None."""

    def plain(value):
        if value is None or (isinstance(value, float) and np.isnan(value)):
            return None
        return value.item() if isinstance(value, np.generic) else value

    records = []
    for row in table.to_dict("records"):
        record = {key: plain(row.get(key)) for key in IDENTITY_KEYS}
        for key in COMPARE_KEYS:
            if key in INTERVAL_KEYS:
                parts = ("est", "lo", "hi") if key == "resolve_delta" else ("est", "lo", "hi", "n_tasks")
                record[key] = {part: plain(row[f"{key}_{part}"]) for part in parts}
                if key == "cost_ratio":
                    record[key]["method"] = row["cost_ratio_method"]
            else:
                record[key] = plain(row[key])
        records.append(record)
    return records


def compare_columns() -> list[str]:
    """The flat (CSV) columns of the command's output, in order (``cost_ratio_method`` after
    the cost ratio's interval columns)."""
    columns = list(IDENTITY_KEYS)
    for key in COMPARE_KEYS:
        if key in INTERVAL_KEYS:
            parts = ("est", "lo", "hi") if key == "resolve_delta" else ("est", "lo", "hi", "n_tasks")
            columns += [f"{key}_{part}" for part in parts] + (["cost_ratio_method"] if key == "cost_ratio" else [])
        else:
            columns.append(key)
    return columns


# -- paired policy differences -----------------------------------------------------------


def paired_differences(
    runs: pd.DataFrame,
    *,
    model: str,
    benchmark: str,
    cohort: str | None = None,
    pairs: list[tuple[str, str]] | None = None,
    n_boot: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    holm: bool = False,
    alpha: float = 0.05,
    attempts: int | None = None,
) -> pd.DataFrame:
    """Resolve rate of cell A minus cell B (percentage points) over the planned attempts on the
    pair's tasks (``comparison_tasks``), with a task-bootstrap percentile interval, a two-sided
    bootstrap p-value (2 * min(P*(d <= 0), P*(d >= 0)), capped at 1) and optionally
    Holm-adjusted p-values across the family. ``pairs`` are cell slugs; default: every pair of
    cells, FC included."""
    selected = select(runs, model=model, benchmark=benchmark, cohort=cohort)
    attempts = attempts or attempts_in_table(selected)
    by_cell = {str(cell): group for cell, group in selected.groupby("cell", observed=True, sort=True)}
    pairs = pairs if pairs is not None else list(combinations(sorted(by_cell), 2))
    compared = list(dict.fromkeys(cell for pair in pairs for cell in pair))
    for cell in compared:
        if cell not in by_cell:
            raise KeyError(f"cell {cell!r} has no runs for model {model!r}, benchmark {benchmark!r}")
    # each cell is in several pairs: its per-task successes and description are found once
    success = {cell: task_success(by_cell[cell], attempts) for cell in compared}
    described = {cell: cell_description(by_cell[cell]) for cell in compared}
    rows = []
    for cell_a, cell_b in pairs:
        tasks = comparison_tasks(by_cell[cell_a], by_cell[cell_b])
        a = success[cell_a].reindex(tasks, fill_value=0.0).to_numpy(float)
        b = success[cell_b].reindex(tasks, fill_value=0.0).to_numpy(float)
        diffs = 100 * boot_means(resample_counts(len(tasks), n_boot, seed), a - b)
        lo, hi = percentile_interval(diffs)
        finite = diffs[np.isfinite(diffs)]
        p = min(1.0, 2 * min((finite <= 0).mean(), (finite >= 0).mean())) if finite.size else np.nan
        da, db = described[cell_a], described[cell_b]
        rows.append(
            {
                "cell_a": cell_a,
                "cell_b": cell_b,
                "policy_a": da["policy"],
                "setting_a": da["setting"],
                "policy_b": db["policy"],
                "setting_b": db["setting"],
                "n_tasks": len(tasks),
                "diff_pp": 100 * float((a - b).mean()) if len(tasks) else np.nan,
                "diff_pp_lo": lo,
                "diff_pp_hi": hi,
                "excludes_zero": bool(lo > 0 or hi < 0),
                "p_boot": p,
            }
        )
    table = pd.DataFrame(rows)
    if holm and len(table):
        from statsmodels.stats.multitest import multipletests

        known = table["p_boot"].notna().to_numpy()
        table["p_holm"] = np.nan
        table["reject_holm"] = False
        if known.any():
            with _older_objects_frozen():
                reject, adjusted, _, _ = multipletests(table.loc[known, "p_boot"], alpha=alpha, method="holm")
            table.loc[known, "p_holm"] = adjusted
            table.loc[known, "reject_holm"] = reject
    return table


@contextlib.contextmanager
def _older_objects_frozen():
    """The objects that exist set aside from the cycle collector (``gc.freeze``) inside the block:
    statsmodels' Holm correction runs a full collection on every call, which then walks only what
    the block made, not every object of the process (a run table's worth after an aggregate).
    Where objects are frozen already (the caller's own ``gc.freeze``), nothing is done: unfreezing
    takes back every frozen object, not only ours."""
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


# -- outcome breakdown -------------------------------------------------------------------


def outcome_breakdown(
    runs: pd.DataFrame,
    *,
    model: str | None = None,
    benchmark: str | None = None,
    cohort: str | None = None,
    attempts: int | None = None,
    tasks: Iterable[str] | None = None,
) -> pd.DataFrame:
    """Planned attempts per outcome class and cell (every class listed, zeros included), with
    shares. A cell's planned attempts are attempts 1..A (default: the table's largest attempt
    number) of the planned ``tasks`` (default: every task any cell of its (benchmark, model,
    cohort) recorded); those without a run are counted as ``other`` (other/missing) and also in
    ``n_missing``. ``n_planned`` is the bar's total."""
    selected = select(runs, model=model, benchmark=benchmark, cohort=cohort)
    attempts = attempts or attempts_in_table(selected)
    scope = ["benchmark", "model", "cohort"] if "cohort" in selected else ["benchmark", "model"]
    given = None if tasks is None else sorted({str(t) for t in tasks})
    rows = []
    for key, same_scope in selected.groupby(scope, observed=True, sort=True, dropna=False):
        universe = given if given is not None else sorted(set(same_scope["task_id"].astype(str)))
        n_planned = len(universe) * attempts
        for cell, group in same_scope.groupby("cell", observed=True, sort=True):
            counts = planned_outcome_counts(group, universe, attempts)
            n_recorded = len(planned_runs_of(group, universe, attempts))
            description = cell_description(group)
            for outcome in OUTCOME_CLASSES:
                rows.append(
                    {
                        "benchmark": key[0],
                        "model": key[1],
                        "cell": str(cell),
                        **{c: description.get(c) for c in CELL_COLUMNS},
                        "outcome_class": outcome,
                        "n": counts[outcome],
                        "share": counts[outcome] / n_planned if n_planned else np.nan,
                        "n_planned": n_planned,
                        "n_missing": n_planned - n_recorded,
                    }
                )
    columns = ["benchmark", "model", "cell", *CELL_COLUMNS, "outcome_class", "n", "share", "n_planned", "n_missing"]
    return pd.DataFrame(rows, columns=columns)
