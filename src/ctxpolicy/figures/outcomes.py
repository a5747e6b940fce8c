"""Figure 20: how runs ended at the primary configurations, stacked to 100 %.

Classes (``ctxpolicy.metrics.outcomes``): success, time-limited, step-limited, submitted
but unsuccessful, other or missing.
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


def compute(runs: pd.DataFrame, config: Mapping[str, Any], *, n_boot: int = 0, seed: int = 0) -> Prepared:
    from ctxpolicy.metrics.compare import outcome_breakdown

    block = inputs.block(config, "full_comparison")
    wanted = set(comparisons.policies_of(config, "full_comparison")) | {style.FC}
    combos = inputs.combos(config, "full_comparison")
    frames, notes_ = [], []
    for benchmark, model in combos:
        own = comparisons.runs_of(runs, config, benchmark, model)
        own = own[own["policy"].astype(str).isin(wanted)
                  & inputs.setting_matches(own["setting"], block.get("setting", "primary"))
                  & own["summarizer"].isna()]
        if own.empty:
            notes_.append(f"no runs for {model} on {benchmark}.")
            continue
        frames.append(outcome_breakdown(own, model=model, benchmark=benchmark))
    table = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    if not table.empty:
        table = table.assign(benchmark=table["benchmark"].astype(str), model=table["model"].astype(str),
                             policy=table["policy"].astype(str))
    return Prepared(table, notes_, {"combos": combos})


def plot(data: Prepared):
    title = "Figure 20: run outcomes at the primary configurations"
    combos = ax_.combos_with_data(data, data.meta.get("combos") or [])
    if not combos:
        return notes.note_figure(title, data.note_text() or "no data")
    specs = style.order_policies(data.table["policy"])
    fig, grid = ax_.grid(1, len(combos), row_height=0.28 * len(specs) + 0.9,
                         width=min(style.FULL_WIDTH, 3.3 * len(combos)), sharey=True)
    y = np.arange(len(specs))[::-1]
    for ax, (benchmark, model) in zip(grid[0, :], combos):
        rows = data.table[(data.table["benchmark"] == benchmark) & (data.table["model"] == model)]
        shares = (rows.pivot_table(index="policy", columns="outcome_class", values="share",
                                   aggfunc="sum", observed=False)
                  .reindex(index=specs, columns=list(style.OUTCOME_ORDER)).fillna(0.0))
        left = np.zeros(len(specs))
        for outcome in style.OUTCOME_ORDER:
            values = 100 * shares[outcome].to_numpy()
            ax.barh(y, values, left=left, color=style.OUTCOME_COLORS[outcome], height=0.7,
                    edgecolor="white", linewidth=0.3)
            left += values
        ax.set_xlim(0, 100)
        ax.set_yticks(y, [style.policy_label(p) for p in specs])
        ax.set_xlabel("runs (%)")
        ax.grid(axis="y", visible=False)
        ax.set_title(ax_.combo_title(benchmark, model), loc="left")
    ax_.legend_top(fig, [Patch(color=style.OUTCOME_COLORS[o], label=style.OUTCOME_LABELS[o])
                         for o in style.OUTCOME_ORDER])
    if data.notes:
        notes.footnote(fig, data.note_text())
    return fig
