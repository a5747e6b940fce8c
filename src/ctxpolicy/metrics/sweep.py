"""Descriptions of the threshold and depth sweep (Figure 3): how often each policy fired, and
the all-attempts summary table. Pure functions of the runs and calls tables."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ctxpolicy.metrics import cost_methods
from ctxpolicy.metrics.compare import LATENCY, resolve_rate, with_latency
from ctxpolicy.metrics.depth_wins import best_flags


def firings_per_attempt(runs: pd.DataFrame, calls: pd.DataFrame | None) -> tuple[pd.DataFrame, list[str]]:
    """Mean compression firings per attempt for each policy and setting: a firing is one step
    at which the policy compressed, so a stacked policy's stages count once. Counted from the
    calls table (steps with events); without it, from the runs' event counts, which count
    each stage (and the figure says so). A description of the runs, not an estimate: no interval."""
    columns = ["policy", "setting", "firings_per_attempt", "threshold_tokens", "n_attempts"]
    if runs.empty:
        return pd.DataFrame(columns=columns), []
    runs = runs.assign(
        policy=runs["policy"].astype(str), setting=runs["setting"].astype(str), run_dir=runs["run_dir"].astype(str)
    )
    said: list[str] = []
    have_calls = calls is not None and not calls.empty and {"run_dir", "step", "n_events"} <= set(calls)
    if have_calls:
        mine = calls[calls["run_dir"].astype(str).isin(set(runs["run_dir"]))]
        fired = mine[mine["n_events"].fillna(0).astype(float) > 0]
        per_run = fired.groupby(fired["run_dir"].astype(str))["step"].nunique()
        firings = runs["run_dir"].map(per_run).fillna(0.0)
        if mine.empty:
            have_calls = False
    if not have_calls:
        firings = runs["compression_events"].astype(float)
        said.append(
            "compression frequency counted from the runs' event totals (no calls table): "
            "a stacked policy's stages count separately."
        )
    return (
        runs.assign(firings=firings)
        .groupby(["policy", "setting"], as_index=False)
        .agg(
            firings_per_attempt=("firings", "mean"),
            threshold_tokens=("threshold_tokens", "median"),
            n_attempts=("run_dir", "size"),
        )
    )[columns], said


def all_attempts_summary(runs: pd.DataFrame, cells: dict, method: str, *, attempts: int | None = None) -> pd.DataFrame:
    """Figure 3's table: per setting and policy, over **all** attempts (time-capped included):
    resolve rate, billed cost relative to FC (task means over the tasks both ran) and mean
    latency in seconds; ``best_*`` marks the best across depths within each primitive and
    setting, only where it has several depths there (``metrics.depth_wins.best_flags``). Resolve
    rates are over the ``attempts`` planned attempts (missing ones unresolved).

    ``runs`` are one (benchmark, model)'s; ``cells`` names the runs behind each row by cell slug
    (the table's ``cell`` column): ``{"fc": FC slug, "rows": [(setting, policy, slug), ...]}``
    (``figures.sweep.summary_cells``), so another track's cells of the same policy and setting
    (the summarizer comparison's) never count."""
    columns = [
        "setting",
        "policy",
        "primitive",
        "depth",
        "n_tasks",
        "resolve_rate",
        "cost_ratio_all",
        "latency_s",
        "best_resolve",
        "best_cost",
        "best_latency",
    ]
    if runs.empty:
        return pd.DataFrame(columns=columns)
    billed = cost_methods.method(method).billed_column
    runs = with_latency(runs)
    slug = runs["cell"].astype(str)
    fc = runs[(slug == str(cells["fc"])).to_numpy()]
    fc_cost = fc.groupby("task_id", observed=True)[billed].mean()
    rows = []
    for setting, policy, cell in cells["rows"]:
        mine = runs[(slug == cell).to_numpy()]
        if mine.empty:
            continue
        cost = mine.groupby("task_id", observed=True)[billed].mean()
        shared = cost.dropna().index.intersection(fc_cost.dropna().index)
        fc_mean = fc_cost[shared].mean() if len(shared) else np.nan
        primitive, depth = mine["primitive"].iloc[0], mine["depth"].iloc[0]
        rows.append(
            {
                "setting": setting,
                "policy": policy,
                "primitive": primitive,
                "depth": depth,
                "n_tasks": int(mine["task_id"].nunique()),
                "resolve_rate": resolve_rate(mine, attempts),
                "cost_ratio_all": cost[shared].mean() / fc_mean if len(shared) and fc_mean > 0 else np.nan,
                "latency_s": mine.groupby("task_id", observed=True)[LATENCY].mean().mean(),
            }
        )
    table = pd.DataFrame(rows, columns=columns[:8])
    if table.empty:
        return pd.DataFrame(columns=columns)
    return best_flags(table)
