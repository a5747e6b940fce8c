"""Comparisons against full context (FC) on the same model and benchmark.

All functions take the runs table (docs/schema.md) and return tidy DataFrames. A policy is
identified by its cell (policy spec, threshold setting, summarizer); FC is the cell whose
policy is "FC". The rules are spelled out in docs/metrics.md; each is one small function here.
"""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pandas as pd

from ctxpolicy.metrics.bootstrap import (DEFAULT_RESAMPLES, boot_means, boot_ratio,
                                         percentile_interval, resample_counts)
from ctxpolicy.metrics.outcomes import OUTCOME_CLASSES

FC = "FC"
# output column -> runs column; cost_ratio uses the exact cache count
RESOURCES = {"token_ratio": "total_tokens", "latency_ratio": "wall_s", "cost_ratio": "billed_exact",
             "cost_ratio_est": "billed_est", "cost_ratio_measured": "billed_measured",
             "calls_ratio": "agent_calls", "retrieval_ratio": "retrieval_cmds",
             "execution_ratio": "execution_cmds"}
CELL_COLUMNS = ("policy", "primitive", "trigger", "depth", "setting", "summarizer")


# -- selection ---------------------------------------------------------------------------

def select(runs: pd.DataFrame, *, model: str | None = None, benchmark: str | None = None,
           cohort: str | None = None) -> pd.DataFrame:
    mask = np.ones(len(runs), dtype=bool)
    for column, value in (("model", model), ("benchmark", benchmark), ("cohort", cohort)):
        if value is not None:
            mask &= (runs[column] == value).to_numpy()
    return runs[mask]


def fc_runs(runs: pd.DataFrame) -> pd.DataFrame:
    return runs[(runs["policy"] == FC).to_numpy()]


def policy_cells(runs: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """(cell, runs) for every non-FC cell, in cell order."""
    others = runs[(runs["policy"] != FC).to_numpy()]
    return [(str(cell), group) for cell, group in others.groupby("cell", observed=True, sort=True)]


def cell_description(group: pd.DataFrame) -> dict:
    first = group.iloc[0]
    return {c: (None if pd.isna(first[c]) else first[c]) for c in CELL_COLUMNS if c in group}


# -- per-task values ---------------------------------------------------------------------

def task_success(runs: pd.DataFrame) -> pd.Series:
    """Each task's success fraction over all its recorded attempts."""
    return runs.groupby("task_id", observed=True)["resolved"].mean().astype(float)


def resource_eligible(runs: pd.DataFrame) -> pd.DataFrame:
    """Runs that count for resource ratios: not time-limited, at least two prompt counts."""
    return runs[((runs["outcome"] != "time_limit") & (runs["n_prompt_counts"] >= 2)).to_numpy()]


def task_resource_means(runs: pd.DataFrame, column: str) -> pd.Series:
    """Per-task mean of one resource over eligible runs that have a value for it."""
    eligible = resource_eligible(runs)
    return eligible.groupby("task_id", observed=True)[column].mean().dropna()


def resolve_rate(runs: pd.DataFrame) -> float:
    """Mean over tasks of each task's success fraction."""
    per_task = task_success(runs)
    return float(per_task.mean()) if len(per_task) else float("nan")


def resource_ratio(policy: pd.DataFrame, fc: pd.DataFrame, column: str) -> tuple[float, int]:
    """Policy mean over tasks measured on both sides / FC mean over the same tasks."""
    a, b = task_resource_means(policy, column), task_resource_means(fc, column)
    shared = a.index.intersection(b.index)
    if len(shared) == 0 or b[shared].mean() == 0:
        return float("nan"), len(shared)
    return float(a[shared].mean() / b[shared].mean()), len(shared)


def _resource_means(runs: pd.DataFrame) -> pd.DataFrame:
    """Per-task means of every resource column over eligible runs (NaN where none has a value)."""
    return resource_eligible(runs).groupby("task_id", observed=True)[list(RESOURCES.values())].mean()


def _ratio_with_interval(tasks: pd.Index, policy: pd.Series, fc: pd.Series, counts: np.ndarray) -> dict:
    pa, pb = policy.reindex(tasks).to_numpy(float), fc.reindex(tasks).to_numpy(float)
    both = ~np.isnan(pa) & ~np.isnan(pb)
    fc_mean = pb[both].mean() if both.any() else np.nan
    point = pa[both].mean() / fc_mean if both.any() and fc_mean > 0 else np.nan
    lo, hi = percentile_interval(boot_ratio(counts, pa, pb, both))
    return {"ratio": float(point), "lo": lo, "hi": hi, "n": int(both.sum())}


# -- the comparison table ----------------------------------------------------------------

def compare_to_fc(runs: pd.DataFrame, *, model: str, benchmark: str, cohort: str | None = None,
                  n_boot: int = DEFAULT_RESAMPLES, seed: int = 0) -> pd.DataFrame:
    """One row per non-FC cell: resolve-rate difference and resource ratios against FC,
    each with a 95 % task-bootstrap percentile interval. Tasks: those with runs on both sides."""
    selected = select(runs, model=model, benchmark=benchmark, cohort=cohort)
    fc = fc_runs(selected)
    fc_success, fc_means = task_success(fc), _resource_means(fc)
    rows = []
    for cell, group in policy_cells(selected):
        success = task_success(group)
        tasks = success.index.intersection(fc_success.index).sort_values()
        counts = resample_counts(len(tasks), n_boot, seed)
        a, b = success[tasks].to_numpy(float), fc_success[tasks].to_numpy(float)
        delta = 100 * (boot_means(counts, a) - boot_means(counts, b))
        row = {**cell_description(group), "cell": cell, "n_tasks": len(tasks),
               "resolve_rate": a.mean() if len(tasks) else np.nan,
               "fc_resolve_rate": b.mean() if len(tasks) else np.nan}
        row["delta_pp"] = 100 * (row["resolve_rate"] - row["fc_resolve_rate"])
        row["delta_pp_lo"], row["delta_pp_hi"] = percentile_interval(delta)
        means = _resource_means(group)
        for name, column in RESOURCES.items():
            ratio = _ratio_with_interval(tasks, means[column], fc_means[column], counts)
            row[name], row[f"{name}_lo"], row[f"{name}_hi"] = ratio["ratio"], ratio["lo"], ratio["hi"]
            if name == "token_ratio":
                row["n_resource_tasks"] = ratio["n"]
            elif name == "cost_ratio_measured":
                row["n_measured_tasks"] = ratio["n"]
        rows.append(row)
    return pd.DataFrame(rows)


# -- gains and losses --------------------------------------------------------------------

def solved_tasks(runs: pd.DataFrame, *, attempts: int = 3, solved_min: int = 2) -> pd.Series:
    """Per task: solved (bool) when at least ``solved_min`` of its first ``attempts`` attempts
    succeed. Tasks with fewer than ``attempts`` recorded attempts are left out."""
    ranked = runs.sort_values(["task_id", "attempt"])
    first = ranked[(ranked.groupby("task_id", observed=True).cumcount() < attempts).to_numpy()]
    per_task = first.groupby("task_id", observed=True)["resolved"].agg(["size", "sum"])
    per_task = per_task[per_task["size"] >= attempts]
    return per_task["sum"] >= solved_min


def gains_losses(runs: pd.DataFrame, *, model: str, benchmark: str, cohort: str | None = None,
                 attempts: int = 3, solved_min: int = 2) -> pd.DataFrame:
    """Per non-FC cell: tasks solved by the policy and not by FC (gains) and the reverse
    (losses), over tasks with ``attempts`` recorded attempts on both sides. The study's rule is
    attempts=3, solved_min=2; a one-attempt study uses attempts=1, solved_min=1."""
    selected = select(runs, model=model, benchmark=benchmark, cohort=cohort)
    fc = solved_tasks(fc_runs(selected), attempts=attempts, solved_min=solved_min)
    rows = []
    for cell, group in policy_cells(selected):
        policy = solved_tasks(group, attempts=attempts, solved_min=solved_min)
        tasks = policy.index.intersection(fc.index).sort_values()
        p, f = policy[tasks], fc[tasks]
        gains, losses = tasks[(p & ~f).to_numpy()], tasks[(~p & f).to_numpy()]
        rows.append({**cell_description(group), "cell": cell, "n_tasks": len(tasks),
                     "attempts": attempts, "solved_min": solved_min,
                     "policy_solved": int(p.sum()), "fc_solved": int(f.sum()),
                     "gains": len(gains), "losses": len(losses), "net": len(gains) - len(losses),
                     "gain_tasks": list(map(str, gains)), "loss_tasks": list(map(str, losses))})
    return pd.DataFrame(rows)


# -- paired policy differences -----------------------------------------------------------

def paired_differences(runs: pd.DataFrame, *, model: str, benchmark: str, cohort: str | None = None,
                       pairs: list[tuple[str, str]] | None = None, n_boot: int = DEFAULT_RESAMPLES,
                       seed: int = 0, holm: bool = False, alpha: float = 0.05) -> pd.DataFrame:
    """Resolve rate of cell A minus cell B (percentage points) on their shared tasks, with a
    task-bootstrap percentile interval, a two-sided bootstrap p-value
    (2 * min(P*(d <= 0), P*(d >= 0)), capped at 1) and optionally Holm-adjusted p-values across
    the family. ``pairs`` are cell slugs; default: every pair of cells, FC included."""
    selected = select(runs, model=model, benchmark=benchmark, cohort=cohort)
    by_cell = {str(cell): group for cell, group in selected.groupby("cell", observed=True, sort=True)}
    pairs = pairs if pairs is not None else list(combinations(sorted(by_cell), 2))
    rows = []
    for cell_a, cell_b in pairs:
        for cell in (cell_a, cell_b):
            if cell not in by_cell:
                raise KeyError(f"cell {cell!r} has no runs for model {model!r}, benchmark {benchmark!r}")
        sa, sb = task_success(by_cell[cell_a]), task_success(by_cell[cell_b])
        tasks = sa.index.intersection(sb.index).sort_values()
        a, b = sa[tasks].to_numpy(float), sb[tasks].to_numpy(float)
        diffs = 100 * boot_means(resample_counts(len(tasks), n_boot, seed), a - b)
        lo, hi = percentile_interval(diffs)
        finite = diffs[np.isfinite(diffs)]
        p = min(1.0, 2 * min((finite <= 0).mean(), (finite >= 0).mean())) if finite.size else np.nan
        da, db = cell_description(by_cell[cell_a]), cell_description(by_cell[cell_b])
        rows.append({"cell_a": cell_a, "cell_b": cell_b, "policy_a": da["policy"], "setting_a": da["setting"],
                     "policy_b": db["policy"], "setting_b": db["setting"], "n_tasks": len(tasks),
                     "diff_pp": 100 * float((a - b).mean()) if len(tasks) else np.nan,
                     "diff_pp_lo": lo, "diff_pp_hi": hi, "excludes_zero": bool(lo > 0 or hi < 0),
                     "p_boot": p})
    table = pd.DataFrame(rows)
    if holm and len(table):
        from statsmodels.stats.multitest import multipletests

        known = table["p_boot"].notna().to_numpy()
        table["p_holm"] = np.nan
        table["reject_holm"] = False
        if known.any():
            reject, adjusted, _, _ = multipletests(table.loc[known, "p_boot"], alpha=alpha, method="holm")
            table.loc[known, "p_holm"] = adjusted
            table.loc[known, "reject_holm"] = reject
    return table


# -- execution length --------------------------------------------------------------------

def execution_length(runs: pd.DataFrame, *, model: str, benchmark: str, cohort: str | None = None,
                     solved_min: int = 1, n_boot: int = DEFAULT_RESAMPLES, seed: int = 0) -> pd.DataFrame:
    """Agent calls of successful attempts, averaged per task, on tasks solved (at least
    ``solved_min`` successes) by both the policy and FC; percentage change of the policy's
    mean over those tasks against FC's, with a task-bootstrap interval."""
    selected = select(runs, model=model, benchmark=benchmark, cohort=cohort)

    def calls_when_solved(group: pd.DataFrame) -> pd.Series:
        successes = group[group["resolved"].to_numpy()]
        per_task = successes.groupby("task_id", observed=True)["agent_calls"].agg(["size", "mean"])
        return per_task.loc[per_task["size"] >= solved_min, "mean"]

    fc = calls_when_solved(fc_runs(selected))
    rows = []
    for cell, group in policy_cells(selected):
        policy = calls_when_solved(group)
        tasks = policy.index.intersection(fc.index)
        mean_policy = float(policy[tasks].mean()) if len(tasks) else np.nan
        mean_fc = float(fc[tasks].mean()) if len(tasks) else np.nan
        tasks = tasks.sort_values()
        ratios = boot_ratio(resample_counts(len(tasks), n_boot, seed), policy[tasks].to_numpy(float),
                            fc[tasks].to_numpy(float), np.ones(len(tasks), dtype=bool))
        lo, hi = percentile_interval(100 * (ratios - 1))
        rows.append({**cell_description(group), "cell": cell, "n_tasks": len(tasks),
                     "calls_policy": mean_policy, "calls_fc": mean_fc,
                     "pct_change": 100 * (mean_policy / mean_fc - 1) if len(tasks) else np.nan,
                     "pct_change_lo": lo, "pct_change_hi": hi})
    return pd.DataFrame(rows)


# -- outcome breakdown -------------------------------------------------------------------

def outcome_breakdown(runs: pd.DataFrame, *, model: str | None = None, benchmark: str | None = None,
                      cohort: str | None = None) -> pd.DataFrame:
    """Runs per outcome class and cell (every class listed, zeros included), with shares."""
    selected = select(runs, model=model, benchmark=benchmark, cohort=cohort)
    keys = ["benchmark", "model", "cell"]
    counts = (selected.assign(outcome_class=pd.Categorical(selected["outcome_class"].astype(str),
                                                           categories=OUTCOME_CLASSES))
              .groupby(keys + ["outcome_class"], observed=False).size().rename("n").reset_index())
    totals = counts.groupby(keys, observed=True)["n"].transform("sum")
    counts = counts[(totals > 0).to_numpy()].copy()
    counts["share"] = counts["n"] / totals[totals > 0]
    described = (selected.drop_duplicates("cell")[["cell", *CELL_COLUMNS]]
                 .astype({"cell": str}))
    counts["cell"] = counts["cell"].astype(str)
    return counts.merge(described, on="cell", how="left")[
        ["benchmark", "model", "cell", *CELL_COLUMNS, "outcome_class", "n", "share"]]
