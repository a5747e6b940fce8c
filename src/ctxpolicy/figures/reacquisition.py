"""Beyond the study: reacquisition. Retrieval commands (reading state back) and execution
commands per run, relative to FC, per policy of the full comparison, with 95 % task-bootstrap
intervals (``compare_to_fc``'s ``retrieval_ratio`` and ``execution_ratio``; top row); and, from
the compression audit (``events.parquet``, ``ctxpolicy audit``), reacquisition commands per
compression step: reads of a path or command whose output the step removed, the part of them
that reads back an anchor the step lost (dark), and, as text, the number of steps, anchors lost
per step and the median number of steps until the first read-back (bottom row;
docs/analysis.md).
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

KINDS = (("retrieval_ratio", "retrieval", ""), ("execution_ratio", "execution", "//"))
PER_STEP = "per_step"  # the part of ``Prepared.extra`` (and of data.csv) with the audit's rates


def compute(runs, config: Mapping[str, Any], *, n_boot: int, seed: int,
            events: pd.DataFrame | None = None) -> Prepared:
    data = comparisons.compare_full_comparison(runs, config, n_boot=n_boot, seed=seed)
    if events is not None:
        from ctxpolicy.figures.retention import policy_rates

        compared = set(comparisons.policies_of(config, "full_comparison"))
        if not events.empty and compared:  # the full comparison's policies, as in the top row
            events = events[events["policy"].astype(str).isin(compared)]
        per_step = policy_rates(events, config, n_boot=n_boot, seed=seed, what="reacquisition per step")
        data.extra[PER_STEP] = per_step.table
        data.meta[PER_STEP] = per_step.meta.get("combos") or []
        data.notes += [f"Per compression step: {n}" for n in per_step.notes]
    return data


def plot(data: Prepared):
    title = "Reacquisition: retrieval and execution commands relative to FC"
    per_step = data.extra.get(PER_STEP)
    step_combos = ([c for c in data.meta.get(PER_STEP) or []
                    if c in set(zip(per_step["benchmark"].astype(str), per_step["model"].astype(str)))]
                   if per_step is not None and not per_step.empty else [])
    combos = ax_.combos_with_data(data, data.meta.get("combos") or [])
    if not combos and not step_combos:
        return notes.note_figure(title, data.notes)
    specs = style.order_policies(data.table["policy"]) if combos else []
    if step_combos:
        specs += [p for p in style.order_policies(per_step["policy"].astype(str).unique()) if p not in specs]
    columns = max(len(combos), len(step_combos))
    rows = 2 if combos and step_combos else 1
    fig, grid = ax_.grid(rows, columns, row_height=0.3 * len(specs) + 0.9,
                         width=min(style.FULL_WIDTH, 3.3 * columns), sharey=True)
    y = np.arange(len(specs))[::-1]
    if combos:
        _plot_ratios(grid[0, :], data, combos, specs, y)
    if step_combos:
        _plot_per_step(grid[rows - 1, :], per_step, step_combos, specs, y)
    for row_axes, used in zip(grid, [len(combos), len(step_combos)] if rows == 2 else [columns]):
        for ax in row_axes[used:]:
            ax.set_visible(False)
            fig.delaxes(ax)
    handles = [Patch(facecolor="#808080", edgecolor="white", hatch=h, label=f"{l} commands")
               for _, l, h in KINDS] if combos else []
    if step_combos:
        handles += [Patch(facecolor="#BBBBBB", label="reacquisitions per compression step"),
                    Patch(facecolor="#222222", label="... of an anchor the step lost")]
    ax_.legend_top(fig, handles, ncol=2 if len(handles) > 3 else None)
    gaps = [n for n in data.notes if "resource ratios" in n]
    return notes.finish(fig, data.notes, empty_panel=" ".join(gaps) or None)


def _plot_ratios(axes, data: Prepared, combos, specs, y) -> None:
    for ax, (benchmark, model) in zip(axes, combos):
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


def _plot_per_step(axes, per_step: pd.DataFrame, combos, specs, y) -> None:
    for ax, (benchmark, model) in zip(axes, combos):
        part = per_step[(per_step["benchmark"] == benchmark) & (per_step["model"] == model)]
        rows = part.set_index(part["policy"].astype(str)).reindex(specs)
        colors = [style.policy_color(p) for p in specs]
        total = rows["reacq_per_event"].astype(float)
        of_lost = (total * rows["reacq_of_lost_share"].astype(float)).fillna(0.0)
        ax.barh(y, total.fillna(0.0), height=0.7, color=colors, edgecolor="white", linewidth=0.3,
                xerr=ax_.interval(rows, "reacq_per_event"), error_kw={"elinewidth": 0.7, "ecolor": "#333333"})
        ax.barh(y, of_lost, height=0.3, color="#222222")
        labels = rows[["n_events", "lost_per_event", "median_steps_to_reacq"]].itertuples(index=False)
        for yy, (n, lost, steps) in zip(y, labels):
            if pd.isna(n):
                continue
            first = "—" if pd.isna(steps) else f"{steps:g}"
            ax.annotate(f"n={n:g} · lost {lost:.1f}/step · 1st after {first}", (1.0, yy),
                        xycoords=("axes fraction", "data"), ha="right", va="bottom", xytext=(0, 5),
                        textcoords="offset points", fontsize=5.5, color="#444444")
        ax.set_yticks(y, [style.policy_label(p) for p in specs])
        ax.set_xlabel("reacquisitions per step")
        ax.grid(axis="y", visible=False)
        ax.set_title(ax_.combo_title(benchmark, model), loc="left")
