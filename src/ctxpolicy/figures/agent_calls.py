"""Figure 21: change in agent calls relative to FC on shared solved tasks.

A task is solved by a policy when at least ⌈2/3·attempts⌉ of its attempts succeed (2 of 3),
for the policy and for FC alike; agent calls (summarizer calls excluded) are averaged over the
successful attempts within each task, then over the shared solved tasks; the bar is the
percentage change against FC with its paired 95 % task-bootstrap interval and n shared tasks.
Where fewer than ``MIN_TASKS_FOR_INTERVAL`` tasks are shared no interval is drawn, and the
note says so. Data columns: ``calls_change_{est,lo,hi,n_tasks}`` (fractions, as
``ctxpolicy compare`` prints them).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from ctxpolicy.figures import axes as ax_
from ctxpolicy.figures import comparisons, notes, style
from ctxpolicy.figures.prepared import Prepared
from ctxpolicy.metrics.compare import solved_threshold

MIN_TASKS_FOR_INTERVAL = 3


def calls_change_metric(config: Mapping[str, Any]):
    from ctxpolicy.metrics.compare import execution_length

    need = solved_threshold(comparisons.planned_attempts(config))

    def metric(runs, *, model, benchmark, n_boot, seed, **_):
        table = execution_length(runs, model=model, benchmark=benchmark, solved_min=need,
                                 n_boot=n_boot, seed=seed)
        if table.empty:
            return table
        out = table.assign(calls_change_est=table["pct_change"] / 100, calls_change_lo=table["pct_change_lo"] / 100,
                           calls_change_hi=table["pct_change_hi"] / 100, calls_change_n_tasks=table["n_tasks"],
                           solved_min=need)
        few = out["n_tasks"] < MIN_TASKS_FOR_INTERVAL
        out.loc[few, ["calls_change_lo", "calls_change_hi"]] = np.nan
        return out.drop(columns=["pct_change", "pct_change_lo", "pct_change_hi"])
    return metric


def compute(runs: pd.DataFrame, config: Mapping[str, Any], *, n_boot: int, seed: int) -> Prepared:
    data = comparisons.compare_full_comparison(runs, config, n_boot=n_boot, seed=seed,
                                               metric=calls_change_metric(config))
    if data.empty:
        return data
    table = data.table
    for (benchmark, model), rows in table.groupby(["benchmark", "model"], sort=False):
        none = rows.loc[rows["n_tasks"] == 0, "policy"].astype(str)
        few = rows.loc[(rows["n_tasks"] > 0) & (rows["n_tasks"] < MIN_TASKS_FOR_INTERVAL), "policy"].astype(str)
        if len(none):
            data.notes.append(f"no task solved by both FC and {', '.join(style.order_policies(none))} "
                              f"({model} on {benchmark}).")
        if len(few):
            data.notes.append(f"no interval drawn for {', '.join(style.order_policies(few))} ({model} on "
                              f"{benchmark}): fewer than {MIN_TASKS_FOR_INTERVAL} shared solved tasks.")
    return data


def plot(data: Prepared):
    title = "Figure 21: agent calls relative to FC (shared solved tasks)"
    combos = ax_.combos_with_data(data, data.meta.get("combos") or [])
    if not combos:
        return notes.note_figure(title, data.notes)
    n_policies = data.table["policy"].nunique()
    fig, grid = ax_.grid(1, len(combos), row_height=0.28 * n_policies + 0.9,
                         width=min(style.FULL_WIDTH, 3.3 * len(combos)), sharey=False)
    for ax, (benchmark, model) in zip(grid[0, :], combos):
        ax.set_title(ax_.combo_title(benchmark, model), loc="left")
        rows = data.table[(data.table["benchmark"] == benchmark) & (data.table["model"] == model)]
        specs = style.order_policies(rows["policy"])
        rows = rows.drop_duplicates("policy").set_index(rows["policy"].astype(str).drop_duplicates()).loc[specs]
        y = np.arange(len(rows))[::-1]
        ax.barh(y, ax_.value(rows, "calls_change", 100.0), color=[style.policy_color(p) for p in specs],
                xerr=ax_.interval(rows, "calls_change", 100.0), height=0.65,
                error_kw={"elinewidth": 0.7, "ecolor": "#333333"})
        ax.axvline(0, color="#666666", linewidth=0.6)
        ax.set_yticks(y, [f"{style.policy_label(p)} (n={n:.0f})" for p, n in zip(specs, rows["n_tasks"])])
        ax.set_xlabel("Δ agent calls vs FC (%)")
        ax.grid(axis="y", visible=False)
    return notes.finish(fig, data.notes)
