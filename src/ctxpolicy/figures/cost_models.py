"""Beyond the study: billed input cost relative to FC under three cache models.

Exact (prefix cache replayed over the recorded messages), estimated (local token counts)
and measured (the server's reported cached tokens), side by side per policy.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.patches import Patch

from ctxpolicy.figures import axes as ax_
from ctxpolicy.figures import comparisons, notes, style
from ctxpolicy.figures.prepared import Prepared

METHODS = (("cost_ratio_exact", "exact", "//"), ("cost_ratio_estimated", "estimated", ""),
           ("cost_ratio_measured", "measured", ".."))


def compute(runs: pd.DataFrame, config: Mapping[str, Any], *, n_boot: int, seed: int) -> Prepared:
    return comparisons.compare_full_comparison(runs, config, n_boot=n_boot, seed=seed)


def plot(data: Prepared):
    title = "Billed input cost relative to FC by cache model"
    if data.empty:
        return notes.note_figure(title, data.notes)
    combos = ax_.combos_with_data(data, data.meta["combos"])
    fig, grid = ax_.grid(len(combos), 1, row_height=1.9)
    width = 0.26
    for ax, (benchmark, model) in zip(grid[:, 0], combos):
        rows = data.table[(data.table["benchmark"] == benchmark) & (data.table["model"] == model)]
        ax.set_title(ax_.combo_title(benchmark, model), loc="left")
        rows = rows.set_index(rows["policy"].astype(str)).loc[style.order_policies(rows["policy"])]
        x = np.arange(len(rows))
        missing = []
        for k, (column, label, hatch) in enumerate(METHODS):
            if f"{column}_est" not in rows or rows[f"{column}_est"].isna().all():
                missing.append(label)
                continue
            ax.bar(x + (k - 1) * width, ax_.value(rows, column), width,
                   yerr=ax_.interval(rows, column), hatch=hatch, label=label,
                   color=[style.policy_color(p) for p in rows.index], edgecolor="white",
                   linewidth=0.4, error_kw={"elinewidth": 0.7, "ecolor": "#333333"})
        ax.axhline(1.0, color="#666666", linewidth=0.6)
        ax.set_xticks(x, [style.policy_label(p) for p in rows.index], rotation=20, ha="right")
        ax.set_ylabel("cost / FC")
        notes.note_if_empty(ax, notes.about(data.notes, model, benchmark))
        if missing and len(missing) < len(METHODS):
            message = f"not available: {', '.join(missing)}"
            ax.text(0.99, 0.97, message, transform=ax.transAxes,
                    ha="right", va="top", fontsize=6.5, color=notes.NOTE_COLOR)
            notes.record(fig, f"{ax_.combo_title(benchmark, model)}: {message}.")
    ax_.legend_top(fig, [Patch(facecolor="#808080", edgecolor="white", hatch=h, label=l)
                           for _, l, h in METHODS])
    gaps = [n for n in data.notes if "resource ratios" in n]
    return notes.finish(fig, data.notes, empty_panel=" ".join(gaps) or None)
