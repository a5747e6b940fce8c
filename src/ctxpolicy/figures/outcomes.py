"""Figure 20: how every planned attempt ended at the primary configurations, stacked to 100 %.

Each bar is one policy's **planned** attempts: the cohort's tasks × the config's ``attempts``
(300 per SWE-bench policy, 120 per Terminal-Bench policy at paper scale). Classes
(``ctxpolicy.metrics.outcomes``), successful verdicts first: success, time-limited,
step-limited, submitted but unsuccessful, other or missing (an attempt never recorded is
missing). A Terminal-Bench run that the harness timed out counts as time-limited even when
the agent recorded no time limit. Segments carry their percentage, bars their n.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.patches import Patch

from ctxpolicy.figures import axes as ax_
from ctxpolicy.figures import comparisons, inputs, notes, style
from ctxpolicy.figures.prepared import Prepared
from ctxpolicy.metrics.outcomes import planned_outcome_counts
from ctxpolicy.threshold_settings import PRIMARY

def compute(runs: pd.DataFrame, config: Mapping[str, Any], *, n_boot: int = 0, seed: int = 0) -> Prepared:
    block = inputs.block(config, "full_comparison")
    wanted = [style.FC, *comparisons.policies_of(config, "full_comparison")]
    attempts = comparisons.planned_attempts(config)
    cohort = block.get("cohort", "main")
    combos = inputs.combos(config, "full_comparison")
    rows, said = [], []
    for benchmark, model in combos:
        own = comparisons.runs_of(runs, config, benchmark, model, cohort)
        own = own[inputs.setting_matches(own["setting"], block.get("setting", PRIMARY))
                  & own["summarizer"].isna()]
        tasks = comparisons.cohort_tasks(config, benchmark, cohort)
        if tasks is None:
            tasks = set(own["task_id"].astype(str))
            said.append(f"the config names no {cohort} cohort for {benchmark}: the planned tasks are "
                        f"those with runs ({len(tasks)}).")
        if own.empty:
            said.append(f"no runs for {model} on {benchmark}: every planned attempt is missing.")
        if not tasks:
            continue
        for policy in wanted:
            counts = planned_outcome_counts(own[own["policy"].astype(str) == policy], sorted(tasks), attempts)
            n = len(tasks) * attempts
            for outcome, k in counts.items():
                rows.append({"benchmark": benchmark, "model": model, "policy": policy,
                             "outcome_class": outcome, "n": k, "planned": n, "share": k / n})
    return Prepared(pd.DataFrame(rows), said, {"combos": combos, "attempts": attempts})


def plot(data: Prepared):
    title = "Figure 20: run outcomes at the primary configurations"
    combos = ax_.combos_with_data(data, data.meta.get("combos") or [])
    if not combos:
        return notes.note_figure(title, data.notes)
    specs = style.order_policies(data.table["policy"])
    fig, grid = ax_.grid(1, len(combos), row_height=0.28 * len(specs) + 0.9,
                         width=min(style.FULL_WIDTH, 3.3 * len(combos)), sharey=True)
    y = np.arange(len(specs))[::-1]
    for ax, (benchmark, model) in zip(grid[0, :], combos):
        rows = data.table[(data.table["benchmark"] == benchmark) & (data.table["model"] == model)]
        shares = (rows.pivot_table(index="policy", columns="outcome_class", values="share", aggfunc="sum")
                  .reindex(index=specs, columns=list(style.OUTCOME_ORDER)).fillna(0.0))
        planned = rows.groupby("policy")["planned"].first().reindex(specs)
        left = np.zeros(len(specs))
        for outcome in style.OUTCOME_ORDER:
            values = 100 * shares[outcome].to_numpy()
            ax.barh(y, values, left=left, color=style.OUTCOME_COLORS[outcome], height=0.7,
                    edgecolor="white", linewidth=0.3)
            for yi, x0, v in zip(y, left, values):
                if v > 0:
                    ax.text(x0 + v / 2, yi, f"{v:.0f}%", ha="center", va="center",
                            fontsize=5.5 if v >= 8 else 4.5)
            left += values
        for yi, n in zip(y, planned):
            if pd.notna(n):
                ax.annotate(f"n={n:.0f}", (1.0, yi), xycoords=("axes fraction", "data"), xytext=(2, 0),
                            textcoords="offset points", ha="left", va="center", fontsize=6)
        ax.set_xlim(0, 100)
        ax.set_yticks(y, [style.policy_label(p) for p in specs])
        ax.set_xlabel("planned attempts (%)")
        ax.grid(axis="y", visible=False)
        ax.set_title(ax_.combo_title(benchmark, model), loc="left")
    ax_.legend_top(fig, [Patch(color=style.OUTCOME_COLORS[o], label=style.OUTCOME_LABELS[o])
                         for o in style.OUTCOME_ORDER])
    return notes.finish(fig, data.notes)
