"""Beyond the study: reacquisition. Retrieval commands (reading state back) and execution
commands per run, relative to FC, per policy of the full comparison, with 95 % task-bootstrap
intervals (``compare_to_baseline``'s ``retrieval_ratio`` and ``execution_ratio``; top row); and, from
the compression audit (``events.parquet``, ``ctxpolicy audit``), reacquisition commands per
compression step: reads of a path or command whose output the step removed, the part of them
that reads back an anchor the step lost (dark), and, as text, the number of steps, anchors lost
per step and the median number of steps until the first read-back (bottom rows;
docs/analysis.md).

Layout: benchmarks in rows and models in columns (``axes.pair_facets``), the command ratios'
rows first, then the per-step rows. ``pairs`` restricts the pairs.
"""

from __future__ import annotations


import numpy as np
import pandas as pd
from matplotlib.patches import Patch

from ctxpolicy.figures import axes as ax_
from ctxpolicy.figures import comparisons, notes, style
from ctxpolicy.figures.prepared import Prepared
from ctxpolicy.study import Study

KINDS = (("retrieval_ratio", "retrieval", ""), ("execution_ratio", "execution", "//"))
PER_STEP = "per_step"  # the part of ``Prepared.extra`` (and of data.csv) with the audit's rates


def compute(
    runs,
    study: Study,
    *,
    n_boot: int,
    seed: int,
    events: pd.DataFrame | None = None,
    pairs: list[tuple[str, str]] | None = None,
) -> Prepared:
    data = comparisons.compare_full_comparison(runs, study, n_boot=n_boot, seed=seed, pairs=pairs)
    if events is not None:
        from ctxpolicy.figures.retention import policy_rates

        compared = set(comparisons.policies_of(study, "full_comparison"))
        if not events.empty and compared:  # the full comparison's policies, as in the top row
            events = events[events["policy"].astype(str).isin(compared)]
        per_step = policy_rates(events, study, n_boot=n_boot, seed=seed, what="reacquisition per step", pairs=pairs)
        data.extra[PER_STEP] = per_step.table
        data.meta[PER_STEP] = per_step.meta.get("combos") or []
        data.notes += [f"Per compression step: {n}" for n in per_step.notes]
    return data


RATIOS, STEPS = "commands per run / FC", "reacquisitions per step"


def plot(data: Prepared, name: str = "reacquisition"):
    title = ax_.figure_title(
        name,
        "reacquisition: retrieval and execution commands relative to FC "
        f"({ax_.setting_words(data.meta)} "
        "threshold, D = 0.5)",
    )
    per_step = data.extra.get(PER_STEP)
    step_combos = (
        [
            c
            for c in data.meta.get(PER_STEP) or []
            if c in set(zip(per_step["benchmark"].astype(str), per_step["model"].astype(str)))
        ]
        if per_step is not None and not per_step.empty
        else []
    )
    combos = ax_.combos_with_data(data, data.meta.get("combos") or [])
    if not combos and not step_combos:
        return notes.note_figure(title, data.notes)
    specs = style.order_policies(data.table["policy"]) if combos else []
    if step_combos:
        specs += [p for p in style.order_policies(per_step["policy"].astype(str).unique()) if p not in specs]
    facets = [(f"{b}\n{RATIOS}", m) for b, m in combos] + [(f"{b}\n{STEPS}", m) for b, m in step_combos]
    # sorted by part, then benchmark, in config order: the ratios' rows above the per-step rows
    order = {c: i for i, c in enumerate(dict.fromkeys(b for b, _ in [*combos, *step_combos]))}
    facets.sort(key=lambda f: (f[0].endswith(STEPS), order[f[0].split("\n")[0]]))
    fig, panels = ax_.policy_facets(facets, specs)
    y = np.arange(len(specs))[::-1]
    for (row_name, model), ax in panels.items():
        benchmark, part = row_name.split("\n", 1)
        if part == RATIOS:
            _plot_ratios(ax, data, benchmark, model, specs, y)
        else:
            _plot_per_step(ax, per_step, benchmark, model, specs, y)
        ax_.policy_rows(ax, y, specs)
    ax_.hide_inner_labels(panels)
    fig.supxlabel("x: the row label's measure", fontsize=7)
    handles = (
        [Patch(facecolor="#808080", edgecolor="white", hatch=h, label=f"{kind} commands") for _, kind, h in KINDS]
        if combos
        else []
    )
    if step_combos:
        handles += [
            Patch(facecolor="#BBBBBB", label="reacquisitions per compression step"),
            Patch(facecolor="#222222", label="... of an anchor the step lost"),
        ]
    ax_.legend_top(fig, handles + ax_.policy_handles(specs), ncol=4, title=title)
    gaps = [n for n in data.notes if "resource ratios" in n]
    return notes.finish(fig, data.said(), empty_panel=" ".join(gaps) or None)


def _plot_ratios(ax, data: Prepared, benchmark: str, model: str, specs, y) -> None:
    rows = ax_.pair_rows(data.table, benchmark, model, specs)
    for k, (ratio, _label, hatch) in enumerate(KINDS):
        if f"{ratio}_est" not in rows:
            continue
        ax.barh(
            y + (0.2 if k == 0 else -0.2),
            ax_.value(rows, ratio) - 1.0,
            left=1.0,
            height=0.38,
            xerr=ax_.interval(rows, ratio),
            hatch=hatch,
            edgecolor="white",
            linewidth=0.3,
            color=[style.policy_color(p) for p in specs],
            error_kw={"elinewidth": 0.7, "ecolor": "#333333"},
        )
    ax.axvline(1.0, color="#666666", linewidth=0.6)
    notes.note_if_empty(ax, notes.about(data.notes, model, benchmark))


def _plot_per_step(ax, per_step: pd.DataFrame, benchmark: str, model: str, specs, y) -> None:
    """Bars per policy; the step count, anchors lost per step and the median number of steps to
    the first read-back are in the data.csv (too many numbers to print per bar at scale)."""
    rows = ax_.pair_rows(per_step, benchmark, model, specs)
    total = rows["reacq_per_event"].astype(float)
    of_lost = (total * rows["reacq_of_lost_share"].astype(float)).fillna(0.0)
    ax.barh(
        y,
        total.fillna(0.0),
        height=0.7,
        color=[style.policy_color(p) for p in specs],
        edgecolor="white",
        linewidth=0.3,
        xerr=ax_.interval(rows, "reacq_per_event"),
        error_kw={"elinewidth": 0.7, "ecolor": "#333333"},
    )
    ax.barh(y, of_lost, height=0.3, color="#222222")
