"""Figure 21: change in agent calls relative to FC on shared solved tasks, with paired
95 % task-bootstrap intervals and the number of tasks each ratio rests on."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from ctxpolicy.figures import axes as ax_
from ctxpolicy.figures import comparisons, notes, style
from ctxpolicy.figures.prepared import Prepared


def _execution_length(runs, *, model, benchmark, n_boot, seed):
    from ctxpolicy.metrics.compare import execution_length

    try:
        return execution_length(runs, model=model, benchmark=benchmark, n_boot=n_boot, seed=seed)
    except TypeError:  # a metrics version without intervals
        return execution_length(runs, model=model, benchmark=benchmark)


def compute(runs: pd.DataFrame, config: Mapping[str, Any], *, n_boot: int, seed: int) -> Prepared:
    data = comparisons.compare_full_comparison(runs, config, n_boot=n_boot, seed=seed, metric=_execution_length)
    if not data.empty and "pct_change_lo" not in data.table:
        data.notes.append("intervals not shown: ctxpolicy.metrics.execution_length reports none yet.")
    return data


def plot(data: Prepared):
    title = "Figure 21: agent calls relative to FC (shared solved tasks)"
    if data.empty:
        return notes.note_figure(title, data.note_text() or "no data")
    combos = ax_.combos_with_data(data, data.meta["combos"])
    n_policies = data.table["policy"].nunique()
    fig, grid = ax_.grid(1, len(combos), row_height=0.28 * n_policies + 0.9,
                         width=min(style.FULL_WIDTH, 3.3 * len(combos)), sharey=False)
    for ax, (benchmark, model) in zip(grid[0, :], combos):
        ax.set_title(ax_.combo_title(benchmark, model), loc="left")
        rows = data.table[(data.table["benchmark"] == benchmark) & (data.table["model"] == model)]
        specs = style.order_policies(rows["policy"])
        rows = rows.set_index(rows["policy"].astype(str)).loc[specs]
        y = np.arange(len(rows))[::-1]
        ax.barh(y, rows["pct_change"].astype(float), color=[style.policy_color(p) for p in specs],
                xerr=ax_.interval(rows, "pct_change"), height=0.65,
                error_kw={"elinewidth": 0.7, "ecolor": "#333333"})
        ax.axvline(0, color="#666666", linewidth=0.6)
        ax.set_yticks(y, [f"{style.policy_label(p)} (n={n:.0f})" for p, n in zip(specs, rows["n_tasks"])])
        ax.set_xlabel("Δ agent calls vs FC (%)")
        ax.grid(axis="y", visible=False)
    if data.notes:
        notes.footnote(fig, data.note_text())
    return fig
