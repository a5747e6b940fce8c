"""Figure 4 and Figures 16–18: task coverage against FC.

A task counts as solved by a cell when at least ⌈2/3·attempts⌉ of its attempts succeed (2 of
3 in the study, 1 of 1 in a one-attempt study; ``ctxpolicy.metrics.compare.gains_losses``).
Gains: tasks FC misses and the policy solves; losses: the reverse. Columns follow
``ctxpolicy compare``: ``solved``, ``baseline_solved``, ``gains``, ``losses``, ``left_out_tasks``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.colors import ListedColormap
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from ctxpolicy.figures import axes as ax_
from ctxpolicy.figures import comparisons, inputs, notes, style
from ctxpolicy.figures.prepared import Prepared
from ctxpolicy.metrics.compare import solved_threshold

GAIN, LOSS = "#009E73", "#D55E00"


def _gains_losses(config: Mapping[str, Any]):
    from ctxpolicy.metrics.compare import gains_losses

    attempts = comparisons.planned_attempts(config)

    def metric(runs, *, model, benchmark, **_):  # no resampling in coverage counts
        table = gains_losses(runs, model=model, benchmark=benchmark, attempts=attempts,
                             solved_min=solved_threshold(attempts))
        return with_compare_keys(table, runs)
    return metric


def with_compare_keys(table: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """``gains_losses`` rows with ``ctxpolicy compare``'s names: ``solved``, ``baseline_solved``,
    ``gains``, ``losses``, ``left_out_tasks`` and ``gains_losses_tasks`` (the tasks the rule
    counts; compare's ``n_tasks`` means all compared tasks, so the name is not reused)."""
    if table.empty:
        return table
    return table.rename(columns={"policy_solved": "solved", "fc_solved": "baseline_solved",
                                 "n_tasks": "gains_losses_tasks"})


def compute(runs: pd.DataFrame, config: Mapping[str, Any], *, n_boot: int = 0, seed: int = 0) -> Prepared:
    """Figure 4: per policy of the full comparison, on its main cohort."""
    return comparisons.compare_full_comparison(runs, config, n_boot=n_boot, seed=seed, metric=_gains_losses(config))


def compute_sweep(runs: pd.DataFrame, config: Mapping[str, Any], *, setting: str,
                  n_boot: int = 0, seed: int = 0) -> Prepared:
    """Figures 16–18: per sweep policy at one threshold setting, on the sweep subset."""
    from ctxpolicy.figures.sweep import sweep_policies

    sweeps = inputs.block(config, "sweeps")
    combos = inputs.combos(config, "sweeps")[:1]
    if setting not in (sweeps.get("settings") or []):
        return Prepared(pd.DataFrame(), [f"the config's sweep has no {setting!r} threshold setting "
                                         f"(settings: {', '.join(sweeps.get('settings') or []) or 'none'})."],
                        {"combos": combos, "setting": setting})
    data = comparisons.compare_block(runs, config, "sweeps", n_boot=n_boot, seed=seed, combos=combos,
                                     cohort=sweeps.get("cohort", "sweep"), setting=setting,
                                     policies=sweep_policies(config), metric=_gains_losses(config))
    if not data.empty:  # threshold-free policies are not part of a threshold's figure
        data.table = data.table[data.table["setting"].astype("object") == setting]
    data.meta["setting"] = setting
    return data


def plot(data: Prepared, title: str = "Figure 4: task coverage against FC"):
    combos = ax_.combos_with_data(data, data.meta.get("combos") or [])
    if not combos:
        return notes.note_figure(title, data.notes)
    specs = style.order_policies(data.table["policy"])
    fig, grid = ax_.grid(1, len(combos), row_height=0.3 * len(specs) + 0.9,
                         width=min(style.FULL_WIDTH, 3.4 * len(combos)), sharey=True)
    y = np.arange(len(specs))[::-1]
    for ax, (benchmark, model) in zip(grid[0, :], combos):
        rows = data.table[(data.table["benchmark"] == benchmark) & (data.table["model"] == model)]
        rows = rows.set_index(rows["policy"].astype(str)).reindex(specs)
        ax.barh(y, rows["gains"], color=GAIN, height=0.6)
        ax.barh(y, -rows["losses"], color=LOSS, height=0.6)
        ax.axvline(0, color="#666666", linewidth=0.6)
        ax.set_yticks(y, [style.policy_label(p) for p in specs])
        for tick, spec in zip(ax.get_yticklabels(), specs):
            tick.set_color(style.policy_color(spec))
        for yi, (_, r) in zip(y, rows.iterrows()):
            if pd.isna(r["gains_losses_tasks"]):
                continue
            ax.annotate(f"{r['solved']:.0f}/{r['gains_losses_tasks']:.0f} (FC {r['baseline_solved']:.0f})",
                        (1.0, yi),
                        xycoords=("axes fraction", "data"), ha="left", va="center", fontsize=6)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        counts = rows[["gains", "losses"]].to_numpy(dtype=float)
        lim = max(1, int(np.nanmax(counts))) if np.isfinite(counts).any() else 1
        ax.set_xlim(-lim - 0.5, lim + 0.5)
        ax.set_xlabel("tasks lost | gained vs FC")
        ax.grid(axis="y", visible=False)
        ax.set_title(ax_.combo_title(benchmark, model), loc="left")
    ax_.legend_top(fig, [Patch(color=GAIN, label="gained (FC misses)"),
                         Patch(color=LOSS, label="lost (FC solves)"),
                         Line2D([], [], linestyle="none", label="right: solved / tasks (FC solved)")])
    return notes.finish(fig, data.notes)


def plot_sweep(data: Prepared, name: str):
    """Gains and losses per depth (left) and which tasks moved (right)."""
    setting = data.meta.get("setting", "?")
    title = f"{style.figure_name(name)}: task-level gains and losses, {setting} threshold"
    if data.empty:
        return notes.note_figure(title, data.notes)
    rows = data.table.set_index(data.table["policy"].astype(str))
    specs = style.order_policies(rows.index)
    rows = rows.loc[specs]
    tasks = sorted({t for col in ("gain_tasks", "loss_tasks") for ts in rows[col] for t in ts})
    fig = plt.figure(figsize=(style.FULL_WIDTH, 0.3 * max(len(specs), 4) + 1.4), layout="constrained")
    left, right = fig.subplots(1, 2, width_ratios=[1, max(1.2, 0.18 * len(tasks))])
    x = np.arange(len(specs))
    left.bar(x - 0.2, rows["gains"], 0.4, color=GAIN, label="gained")
    left.bar(x + 0.2, rows["losses"], 0.4, color=LOSS, label="lost")
    left.set_xticks(x, [style.policy_label(p) for p in specs], rotation=30, ha="right")
    left.set_ylabel("tasks vs FC")
    left.legend(loc="upper left")
    if tasks:
        grid = np.zeros((len(specs), len(tasks)))
        for i, p in enumerate(specs):
            for t in rows.loc[p, "gain_tasks"]:
                grid[i, tasks.index(t)] = 1
            for t in rows.loc[p, "loss_tasks"]:
                grid[i, tasks.index(t)] = -1
        right.imshow(grid, cmap=ListedColormap([LOSS, "#F2F2F2", GAIN]), vmin=-1, vmax=1, aspect="auto")
        right.set_xticks(range(len(tasks)), tasks, rotation=90, fontsize=6)
        right.set_yticks(range(len(specs)), [style.policy_label(p) for p in specs])
        right.grid(False)
        right.set_title("tasks that moved", loc="left")
    else:
        notes.note_on_axes(right, "no task changed between FC and these policies", width=30)
    benchmark, model = data.table["benchmark"].iloc[0], data.table["model"].iloc[0]
    fig.suptitle(f"{model} · {benchmark} · sweep subset · {setting} threshold", x=0.01, ha="left")
    return notes.finish(fig, data.notes)
