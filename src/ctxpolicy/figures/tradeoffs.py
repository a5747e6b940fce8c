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

# (key, label, reference line, scale): resolve_delta is a fraction, drawn in percentage points
PANELS = (("resolve_delta", "Δ resolve rate (pp)", 0.0, 100.0),
          ("latency_ratio", "latency / FC", 1.0, 1.0),
          ("cost_ratio", "billed input cost / FC", 1.0, 1.0))


def compute(runs: pd.DataFrame, config: Mapping[str, Any], *, n_boot: int, seed: int) -> Prepared:
    return comparisons.compare_full_comparison(runs, config, n_boot=n_boot, seed=seed)


def plot(data: Prepared):
    combos = ax_.combos_with_data(data, data.meta.get("combos") or [])
    if not combos:
        return notes.note_figure("Figure 2: success and resources against FC", data.notes)
    fig, grid = ax_.grid(len(combos), len(PANELS), row_height=2.0)
    specs = style.order_policies(data.table["policy"])
    for r, (benchmark, model) in enumerate(combos):
        rows = data.table[(data.table["benchmark"] == benchmark) & (data.table["model"] == model)]
        for c, (key, label, ref, scale) in enumerate(PANELS):
            ax = grid[r, c]
            ax.set_title(f"{ax_.combo_title(benchmark, model)}" if c == 0 else "", loc="left")
            _panel(ax, rows, key, ref, scale)
            notes.note_if_empty(ax, notes.about(data.notes, model, benchmark))
            ax.set_ylabel(comparisons.cost_label(data.meta.get("cost_method", "estimated"))
                          if key == "cost_ratio" else label)
            if r == len(combos) - 1:
                ax.set_xlabel("tokens / FC")
    ax_.legend_top(fig, ax_.policy_handles(specs))
    gaps = [n for n in data.notes if "resource ratios" in n]
    return notes.finish(fig, data.notes, empty_panel=" ".join(gaps) or None)


def _panel(ax, rows: pd.DataFrame, key: str, ref: float, scale: float) -> None:
    """One panel. In the resolve-rate panel a policy without a token ratio (no eligible runs)
    is drawn hollow at x = 1, and the panel says so; resource panels leave it out."""
    x = ax_.value(rows, "tokens_ratio")
    y = ax_.value(rows, key, scale)
    xerr, yerr = ax_.interval(rows, "tokens_ratio"), ax_.interval(rows, key, scale)
    hollow = x.isna() & (key == "resolve_delta")
    for i, (xi, yi, spec, h) in enumerate(zip(x.fillna(1.0) if key == "resolve_delta" else x, y,
                                              rows["policy"].astype(str), hollow)):
        ax_.policy_point(ax, xi, yi, spec,
                         xerr=None if xerr is None or h else xerr[:, [i]],
                         yerr=None if yerr is None else yerr[:, [i]],
                         **({"markerfacecolor": "none"} if h else {}))
    if hollow.any():
        message = "hollow: tokens / FC undefined, drawn at x = 1"
        ax.text(0.02, 0.97, message, transform=ax.transAxes, fontsize=5.5, va="top",
                color=notes.NOTE_COLOR)
        notes.record(ax.figure, message + ".")
    ax.axhline(ref, color="#666666", linewidth=0.6, zorder=1)
    ax.axvline(1.0, color="#666666", linewidth=0.6, linestyle=":", zorder=1)
    if key != "resolve_delta":
        lo, hi = ax.get_xlim()
        ax.plot([lo, hi], [lo, hi], linestyle=":", color="#888888", linewidth=0.8, zorder=1,
                gid=notes.REFERENCE)
        ax.set_xlim(lo, hi)
    if key == "cost_ratio":
        ylo, yhi = ax.get_ylim()
        yhi = max(yhi, 1.05)
        ax.axhspan(1.0, yhi, color=style.REGION_SHADE, zorder=0, linewidth=0, gid=notes.REFERENCE)
        ax.set_ylim(ylo, yhi)
