"""Figure 2: success and resources against FC, per model and benchmark.

x: token usage relative to FC. Panels: resolve-rate change (pp, all runs), latency relative
to FC, billed input cost relative to FC (paired ratios on shared eligible tasks), each with
95 % task-bootstrap intervals. Grey: billed cost above FC. Dotted: savings proportional to
token savings (y = x).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from ctxpolicy.figures import axes as ax_
from ctxpolicy.figures import comparisons, notes, style
from ctxpolicy.figures.prepared import Prepared

PANELS = (("delta_pp", "Δ resolve rate (pp)", 0.0),
          ("latency_ratio", "latency / FC", 1.0),
          ("cost_ratio", "billed input cost / FC", 1.0))


def compute(runs: pd.DataFrame, config: Mapping[str, Any], *, n_boot: int, seed: int) -> Prepared:
    return comparisons.compare_full_comparison(runs, config, n_boot=n_boot, seed=seed)


def plot(data: Prepared):
    combos = ax_.combos_with_data(data, data.meta.get("combos") or [])
    if not combos:
        return notes.note_figure("Figure 2: success and resources against FC",
                                 data.note_text() or "no data")
    fig, grid = ax_.grid(len(combos), len(PANELS), row_height=2.0)
    specs = style.order_policies(data.table["policy"])
    for r, (benchmark, model) in enumerate(combos):
        rows = data.table[(data.table["benchmark"] == benchmark) & (data.table["model"] == model)]
        for c, (column, label, ref) in enumerate(PANELS):
            ax = grid[r, c]
            ax.set_title(f"{ax_.combo_title(benchmark, model)}" if c == 0 else "", loc="left")
            _panel(ax, rows, column, ref)
            ax.set_ylabel(label)
            if r == len(combos) - 1:
                ax.set_xlabel("tokens / FC")
    ax_.legend_top(fig, ax_.policy_handles(specs))
    if data.notes:
        notes.footnote(fig, data.note_text())
    return fig


def _panel(ax, rows: pd.DataFrame, column: str, ref: float) -> None:
    xerr, yerr = ax_.interval(rows, "token_ratio"), ax_.interval(rows, column)
    for i, (_, row) in enumerate(rows.iterrows()):
        ax_.policy_point(ax, row["token_ratio"], row[column], str(row["policy"]),
                         xerr=None if xerr is None else xerr[:, [i]],
                         yerr=None if yerr is None else yerr[:, [i]])
    ax.axhline(ref, color="#666666", linewidth=0.6, zorder=1)
    ax.axvline(1.0, color="#666666", linewidth=0.6, linestyle=":", zorder=1)
    if column != "delta_pp":
        lo, hi = ax.get_xlim()
        ax.plot([lo, hi], [lo, hi], linestyle=":", color="#888888", linewidth=0.8, zorder=1)
        ax.set_xlim(lo, hi)
    if column == "cost_ratio":
        ylo, yhi = ax.get_ylim()
        yhi = max(yhi, 1.05)
        ax.axhspan(1.0, yhi, color=style.REGION_SHADE, zorder=0, linewidth=0)
        ax.set_ylim(ylo, yhi)
