"""Figure 4 and Figures 16–18: task coverage against FC.

A task counts as solved by a cell when at least ⌈2/3·attempts⌉ of its attempts succeed (2 of
3 in the study, 1 of 1 in a one-attempt study; ``ctxpolicy.metrics.compare.compare_to_baseline``'s
gains and losses).
Gains: tasks FC misses and the policy solves; losses: the reverse. Columns follow
``ctxpolicy compare``: ``solved``, ``baseline_solved``, ``gains``, ``losses``, ``left_out_tasks``.
"""

from __future__ import annotations


import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.colors import ListedColormap
from matplotlib.patches import Patch

from ctxpolicy.figures import axes as ax_
from ctxpolicy.figures import comparisons, inputs, notes, style
from ctxpolicy.figures.prepared import Prepared
from ctxpolicy.metrics.compare import solved_threshold
from ctxpolicy.metrics.cost_methods import DEFAULT as DEFAULT_METHOD
from ctxpolicy.study import Study

GAIN, LOSS = "#009E73", "#D55E00"
KEPT, MISSED = "#9E9E9E", "#F0F0F0"  # solved by both; solved by neither
# a task's state for one policy, as drawn: (code, colour, legend label)
STATES = (
    (0, LOSS, "lost: FC solves, policy misses"),
    (1, KEPT, "solved by both"),
    (2, GAIN, "gained: FC misses, policy solves"),
    (3, MISSED, "missed by both"),
)
LABEL_TASKS_MAX = 30  # task ids are printed only up to this many tasks per panel
ROW_IN = 0.17  # inches per policy row, whatever the task labels need
TICK_CHAR_IN = 0.045  # inches per character of a task id printed under a grid (5 pt, rotated 90 degrees)


def label_space(tasks) -> float:
    """Inches the rotated task-id labels under a grid need (none when the ids are not printed),
    added to the panel so that its rows keep their height with long Terminal-Bench names."""
    tasks = [str(t) for t in tasks]
    if not tasks or len(tasks) > LABEL_TASKS_MAX:
        return 0.0
    return TICK_CHAR_IN * max(map(len, tasks))


# The coverage rows: compare_to_baseline's gain/loss keys (docs/metrics.md), and the figure's rule.
GAINS_LOSSES_COLUMNS = (
    "cell",
    "gains_losses_tasks",
    "attempts",
    "solved_min",
    "solved",
    "baseline_solved",
    "gains",
    "losses",
    "net",
    "left_out_tasks",
    "gain_tasks",
    "loss_tasks",
)


def _gains_losses(study: Study):
    from ctxpolicy.metrics.compare import CELL_COLUMNS, compare_to_baseline

    attempts = study.attempts

    def metric(
        runs, *, model, benchmark, seed=0, cost_method=DEFAULT_METHOD, **_
    ):  # counts only: one resample is enough
        table = compare_to_baseline(
            runs, model=model, benchmark=benchmark, attempts=attempts, cost_method=cost_method, n_boot=1, seed=seed
        )
        if table.empty:
            return table
        table = table.assign(solved_min=solved_threshold(attempts), net=table["gains"] - table["losses"])
        table = table[[*(c for c in CELL_COLUMNS if c in table), *GAINS_LOSSES_COLUMNS]]
        return with_task_states(table, runs, model=model, benchmark=benchmark, attempts=attempts)

    return metric


def with_task_states(
    table: pd.DataFrame, runs: pd.DataFrame, *, model: str, benchmark: str, attempts: int
) -> pd.DataFrame:
    """Add the two states the gains/losses rows leave implicit, per cell: ``kept_tasks`` (solved by
    both) and ``missed_tasks`` (by neither), over the same counted tasks and the same ≥⌈2A/3⌉ rule
    (``ctxpolicy.metrics.compare.solved_tasks``); with ``gain_tasks`` and ``loss_tasks`` they place
    every counted task of the task grid."""
    from ctxpolicy.metrics.compare import (
        comparison_tasks,
        fc_runs,
        policy_cells,
        select,
        solved_tasks,
    )

    if table.empty:
        return table
    selected = select(runs, model=model, benchmark=benchmark)
    solved_min = solved_threshold(attempts)
    base = fc_runs(selected)
    fc = solved_tasks(base, attempts=attempts, solved_min=solved_min)
    kept, missed = {}, {}
    for cell, group in policy_cells(selected):
        policy = solved_tasks(group, attempts=attempts, solved_min=solved_min)
        counted = comparison_tasks(group, base).intersection(policy.index).intersection(fc.index)
        p, f = policy[counted].to_numpy(bool), fc[counted].to_numpy(bool)
        kept[cell] = sorted(map(str, counted[p & f]))
        missed[cell] = sorted(map(str, counted[~p & ~f]))
    return table.assign(
        kept_tasks=table["cell"].map(lambda c: kept.get(c, [])),
        missed_tasks=table["cell"].map(lambda c: missed.get(c, [])),
    )


def compute(
    runs: pd.DataFrame,
    study: Study,
    *,
    n_boot: int = 0,
    seed: int = 0,
    pairs: list[tuple[str, str]] | None = None,
) -> Prepared:
    """Figure 4: per policy of the full comparison, on its main cohort (``pairs``: the (model,
    benchmark) pairs to draw; None: all of the block's)."""
    combos, said = comparisons.pair_combos(study, "full_comparison", pairs)
    own = inputs.select_pairs(runs, pairs)
    data = comparisons.compare_full_comparison(
        own, study, n_boot=n_boot, seed=seed, metric=_gains_losses(study), combos=combos
    )
    data.notes = said + data.notes
    data.meta.update(
        thresholds=ax_.threshold_table(own),
        setting=study.section("full_comparison")["setting"],
        attempts=study.attempts,
    )
    return data


def compute_sweep(
    runs: pd.DataFrame,
    study: Study,
    *,
    setting: str,
    n_boot: int = 0,
    seed: int = 0,
    pairs: list[tuple[str, str]] | None = None,
) -> Prepared:
    """Figures 16–18: per sweep policy at one threshold setting, on the sweep subset, for one pair:
    the first of ``pairs`` (``[]``: none, the figure says so), else the sweep block's first."""
    from ctxpolicy.figures.sweep import sweep_policies

    sweeps = study.section("sweeps")
    if pairs is not None and not pairs:
        return Prepared(pd.DataFrame(), [], {"no_pair": True, "setting": setting})
    combos, said = comparisons.pair_combos(study, "sweeps", pairs[:1] if pairs else None)
    combos = combos[:1]
    meta = {
        "combos": combos,
        "setting": setting,
        "attempts": study.attempts,
        "thresholds": ax_.threshold_table(inputs.select_pairs(runs, pairs)),
    }
    if setting not in sweeps["settings"]:
        return Prepared(
            pd.DataFrame(),
            said
            + [
                (
                    f"the config's sweep has no {setting!r} threshold setting "
                    f"(settings: {', '.join(sweeps['settings']) or 'none'})."
                )
            ],
            meta,
        )
    data = comparisons.compare_block(
        runs,
        study,
        "sweeps",
        n_boot=n_boot,
        seed=seed,
        combos=combos,
        cohort=sweeps["cohort"],
        setting=setting,
        policies=sweep_policies(study),
        metric=_gains_losses(study),
    )
    if not data.empty:  # threshold-free policies are not part of a threshold's figure
        data.table = data.table[data.table["setting"].astype("object") == setting]
    data.notes = said + data.notes
    data.meta.update(meta)
    return data


def task_grid(rows: pd.DataFrame, specs: list[str]) -> tuple[pd.DataFrame, int]:
    """Policies × tasks, each cell a state code of ``STATES`` (NaN: not counted for that policy);
    columns: the tasks FC solves, then those it misses, each block ordered by how many policies
    move the task (most first), then by id. Returns the grid and the size of the FC-solved block."""
    by_policy = rows.set_index(rows["policy"].astype(str))
    states: dict[str, dict[str, int]] = {}
    for spec in specs:
        if spec not in by_policy.index:
            continue
        r = by_policy.loc[spec]
        states[spec] = {
            **{t: 0 for t in r["loss_tasks"]},
            **{t: 1 for t in r["kept_tasks"]},
            **{t: 2 for t in r["gain_tasks"]},
            **{t: 3 for t in r["missed_tasks"]},
        }
    grid = pd.DataFrame.from_dict(states, orient="index").reindex(specs)
    if grid.empty:
        return grid, 0
    fc_solved = [t for t in grid.columns if grid[t].isin([0, 1]).any()]
    fc_missed = [t for t in grid.columns if t not in fc_solved]

    def ordered(tasks, moved_code):
        return sorted(tasks, key=lambda t: (-(grid[t] == moved_code).sum(), t))

    return grid[ordered(fc_solved, 0) + ordered(fc_missed, 2)], len(fc_solved)


def _draw_grid(ax, grid: pd.DataFrame, n_solved: int, row_labels: list[str], rows: pd.DataFrame) -> None:
    """One task grid (seaborn.heatmap with cell borders), its two blocks named above it and each
    policy's counts at the right."""
    cmap = ListedColormap([colour for _, colour, _ in STATES])
    values = grid.astype(float)
    style.seaborn().heatmap(
        values,
        ax=ax,
        cmap=cmap,
        vmin=-0.5,
        vmax=len(STATES) - 0.5,
        cbar=False,
        linewidths=0.5,
        linecolor="white",
        mask=values.isna(),
        square=False,
        xticklabels=list(grid.columns) if len(grid.columns) <= LABEL_TASKS_MAX else False,
        yticklabels=row_labels,
    )
    ax.tick_params(axis="x", labelsize=5, rotation=90, length=0)
    ax.tick_params(axis="y", labelsize=6.5, rotation=0, length=0)
    for tick, spec in zip(ax.get_yticklabels(), grid.index):
        tick.set_color(style.policy_color(spec))
    n = len(grid.columns)
    if 0 < n_solved < n:
        ax.axvline(n_solved, color="black", linewidth=1.2)
    for start, stop, label in ((0, n_solved, "FC solves"), (n_solved, n, "FC misses")):
        if stop > start:
            ax.text((start + stop) / 2, -0.15, f"{label} ({stop - start})", ha="center", va="bottom", fontsize=6.5)
    counts = rows.set_index(rows["policy"].astype(str))
    for i, spec in enumerate(grid.index):
        if spec in counts.index and pd.notna(counts.loc[spec, "gains_losses_tasks"]):
            r = counts.loc[spec]
            ax.text(
                n + 0.3,
                i + 0.5,
                f"+{r['gains']:.0f} −{r['losses']:.0f} → {r['solved']:.0f}",
                ha="left",
                va="center",
                fontsize=6.5,  # as the row labels beside it: one font across the panel
                family=plt.rcParams["font.family"],
            )
    ax.set_xlabel("")
    ax.set_ylabel("")


def _state_handles(grid_values) -> list[Patch]:
    present = set(np.unique(np.asarray(grid_values, dtype=float)[np.isfinite(np.asarray(grid_values, dtype=float))]))
    handles = [
        Patch(facecolor=colour, edgecolor="#BBBBBB", linewidth=0.4, label=label)
        for code, colour, label in STATES
        if code in present
    ]
    if np.isnan(np.asarray(grid_values, dtype=float)).any():
        handles.append(
            Patch(facecolor="white", edgecolor="#BBBBBB", linewidth=0.4, label="not counted (attempts missing)")
        )
    return handles


def _rule(attempts: int) -> str:
    return f"solved: ≥ {solved_threshold(attempts)} of {attempts} attempts"


def plot(data: Prepared, title: str | None = None, name: str = "fig4"):
    title = title or f"{style.figure_name(name)}: task coverage against FC"
    combos = ax_.combos_with_data(data, data.meta.get("combos") or [])
    if not combos:
        return notes.note_figure(title, data.notes)
    specs = style.order_policies(data.table["policy"])
    grids = {}
    for benchmark, model in combos:
        rows = data.table[(data.table["benchmark"] == benchmark) & (data.table["model"] == model)]
        grids[(benchmark, model)] = (rows, *task_grid(rows, specs))
    # plt.subplots, not a FacetGrid: each pair's grid has its own tasks (columns), one panel per pair;
    # each panel's rows keep ROW_IN whatever its task labels need below them
    heights = [ROW_IN * len(specs) + 0.55 + label_space(grids[c][1].columns) for c in combos]
    fig, axes = plt.subplots(
        len(combos),
        1,
        figsize=(style.FULL_WIDTH, sum(heights) + 0.6),
        squeeze=False,
        layout="constrained",
        gridspec_kw={"height_ratios": heights},
    )
    drawn = []
    thresholds = data.meta.get("thresholds") or {}
    for ax, (benchmark, model) in zip(axes[:, 0], combos):
        rows, grid, n_solved = grids[(benchmark, model)]
        _draw_grid(ax, grid, n_solved, [style.short_label(s) for s in grid.index], rows)
        drawn.append(grid.to_numpy(dtype=float).ravel())
        ax.set_title(
            f"{model} · {benchmark} · {ax_.pair_threshold_label(thresholds, benchmark, model, data.meta.get('setting'))}",
            loc="left",
            pad=14,
        )
    many = max(len(d) for d in drawn) // max(1, len(specs)) > LABEL_TASKS_MAX
    fig.suptitle(
        f"{title} ({_rule(data.meta.get('attempts', 1))}; depth-tunable policies at D = 0.5; right: "
        f"gained, lost → solved" + ("; task ids in the data file" if many else "") + ")",
        x=0.01,
        ha="left",
    )
    fig.legend(handles=_state_handles(np.concatenate(drawn)), loc="outside lower center", ncol=3, frameon=False)
    return notes.finish(fig, data.said())


def plot_sweep(data: Prepared, name: str):
    """Figures 16–18: one pair's task grid at one threshold, a row per sweep policy and depth."""
    setting = data.meta.get("setting", "?")
    title = f"{style.figure_name(name)}: task coverage against FC, {style.threshold_label(setting)} threshold"
    if data.meta.get("no_pair"):
        return ax_.no_pair_figure(title, name)
    if data.empty:
        return notes.note_figure(title, data.notes)
    specs = style.order_policies(data.table["policy"])
    benchmark, model = data.table["benchmark"].iloc[0], data.table["model"].iloc[0]
    grid, n_solved = task_grid(data.table, specs)
    fig, ax = plt.subplots(
        figsize=(style.FULL_WIDTH, ROW_IN * len(specs) + 1.5 + label_space(grid.columns)), layout="constrained"
    )
    labels = [
        style.short_label(s) + (f" D = {style.depth_of(s):g}" if style.depth_of(s) is not None else "")
        for s in grid.index
    ]
    _draw_grid(ax, grid, n_solved, labels, data.table)
    label = ax_.pair_threshold_label(data.meta.get("thresholds") or {}, benchmark, model, setting)
    title = f"{style.figure_name(name)}: task coverage against FC, {label} threshold"
    ax.set_title(
        f"{model} · {benchmark} · sweep subset ({_rule(data.meta.get('attempts', 1))}; right: gained, lost → solved)",
        loc="left",
        pad=14,
    )
    fig.suptitle(title, x=0.01, ha="left")
    fig.legend(handles=_state_handles(grid.to_numpy(dtype=float)), loc="outside lower center", ncol=3, frameon=False)
    return notes.finish(fig, data.said())
