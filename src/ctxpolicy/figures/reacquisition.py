"""Beyond the study: reacquisition. Retrieval commands (reading state back) and execution
commands per run, relative to FC, per policy of the full comparison, with 95 % task-bootstrap
intervals (``compare_to_fc``'s ``retrieval_ratio`` and ``execution_ratio``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from matplotlib.patches import Patch

from ctxpolicy.figures import axes as ax_
from ctxpolicy.figures import comparisons, notes, style
from ctxpolicy.figures.prepared import Prepared

KINDS = (("retrieval_ratio", "retrieval", ""), ("execution_ratio", "execution", "//"))


def compute(runs, config: Mapping[str, Any], *, n_boot: int, seed: int) -> Prepared:
    return comparisons.compare_full_comparison(runs, config, n_boot=n_boot, seed=seed)


def plot(data: Prepared):
    title = "Reacquisition: retrieval and execution commands relative to FC"
    combos = ax_.combos_with_data(data, data.meta.get("combos") or [])
    if not combos:
        return notes.note_figure(title, data.notes)
    specs = style.order_policies(data.table["policy"])
    fig, grid = ax_.grid(1, len(combos), row_height=0.3 * len(specs) + 0.9,
                         width=min(style.FULL_WIDTH, 3.3 * len(combos)), sharey=True)
    y = np.arange(len(specs))[::-1]
    for ax, (benchmark, model) in zip(grid[0, :], combos):
        rows = data.table[(data.table["benchmark"] == benchmark) & (data.table["model"] == model)]
        rows = rows.set_index(rows["policy"].astype(str)).reindex(specs)
        for k, (ratio, label, hatch) in enumerate(KINDS):
            if f"{ratio}_est" not in rows:
                continue
            err = ax_.interval(rows, ratio)
            ax.barh(y + (0.2 if k == 0 else -0.2), ax_.value(rows, ratio) - 1.0, left=1.0,
                    height=0.38, xerr=err, hatch=hatch, edgecolor="white", linewidth=0.3,
                    color=[style.policy_color(p) for p in specs],
                    error_kw={"elinewidth": 0.7, "ecolor": "#333333"})
        ax.axvline(1.0, color="#666666", linewidth=0.6)
        ax.set_yticks(y, [style.policy_label(p) for p in specs])
        ax.set_xlabel("commands per run / FC")
        ax.grid(axis="y", visible=False)
        ax.set_title(ax_.combo_title(benchmark, model), loc="left")
        notes.note_if_empty(ax, notes.about(data.notes, model, benchmark))
    ax_.legend_top(fig, [Patch(facecolor="#808080", edgecolor="white", hatch=h, label=f"{l} commands")
                         for _, l, h in KINDS])
    gaps = [n for n in data.notes if "resource ratios" in n]
    return notes.finish(fig, data.notes, empty_panel=" ".join(gaps) or None)
