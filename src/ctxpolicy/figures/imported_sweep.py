"""An imported corpus replayed through the sweeps: each sweep configuration's mechanical ratio to
FC (billed input cost, tokens) at each threshold setting, agent's actions held fixed (``ctxpolicy
replay``): the threshold and depth ablations of the study's sweeps, mechanically, without a
behavioural part.

The numbers are ``imported_replay.ratio_rows``'s (ratio of task means to the FC replay, 95 %
task-bootstrap interval, resource-eligible replays, each task on both sides or neither, cost by the
config's method in local counts), for the
configurations of grid.sweeps (``Study.configurations("sweeps")``: the tunable primitives at each
depth and the invariant policies, at each of its settings), including those the full comparison
also asks for. Layout: one column per threshold setting of the sweep, one row per (pair,
resource: billed input cost, then tokens; the x axis shared along a row), one y position per
sweep policy (its label names it; colours by primitive); a grid without sweeps draws a
one-line note.
"""

from __future__ import annotations


import numpy as np
import pandas as pd

from ctxpolicy.figures import axes as ax_
from ctxpolicy.figures import notes, style
from ctxpolicy.figures.imported_replay import RESOURCES, cost_column, ratio_points, ratio_rows, read_replays
from ctxpolicy.figures.prepared import Prepared
from ctxpolicy.study import IMPORTED_TRACK, Study
from ctxpolicy.threshold_settings import SETTINGS

STEM = "imported_sweep"
SWEEP_RESOURCES = tuple(r for r in RESOURCES if r[0] in ("cost", "tokens"))

__all__ = ["STEM", "compute", "plot", "read_replays"]


def compute(replays: pd.DataFrame, study: Study, *, n_boot: int, seed: int) -> Prepared:
    configurations = [(c.policy, c.setting) for c in study.configurations("sweeps") if c.setting is not None]
    settings = [s for s in SETTINGS if any(setting == s for _, setting in configurations)]
    combos = [(p.benchmark, p.model) for p in study.pairs(IMPORTED_TRACK)]
    meta = {"combos": combos, "settings": settings, "cost_method": study.cost_method}
    found: list[str] = []
    if not combos:
        found.append("the config has no imported block: nothing to draw.")
    if not configurations:
        found.append("the grid has no sweep (grid.sweeps: tunable, invariant): nothing to draw.")
    if replays.empty:
        found.append("no replay runs of the imported corpus (workflow/rules/imported.smk).")
    if found:
        return Prepared(pd.DataFrame(), found, meta)
    rows, more = ratio_rows(
        replays, combos, configurations, n_boot=n_boot, seed=seed, cost=cost_column(study), resources=SWEEP_RESOURCES
    )
    return Prepared(pd.DataFrame(rows), more, meta, n=notes.sample_size(replays))


def plot(data: Prepared, name: str = STEM):
    title = ax_.figure_title(name, "imported corpus replayed through the sweeps: mechanical ratio to FC")
    combos = ax_.combos_with_data(data, data.meta.get("combos") or [])
    settings = data.meta.get("settings") or []
    if not combos or not settings:
        return notes.note_figure(title, data.notes)
    specs = ax_.policies_drawn(data)
    nrows = len(combos) * len(SWEEP_RESOURCES)
    fig, grid = ax_.grid(nrows, len(settings), row_height=0.2 * len(specs) + 0.9, sharey=True, sharex="row")
    y = np.arange(len(specs))[::-1].astype(float)
    for c, (benchmark, model) in enumerate(combos):
        own = data.table[(data.table["benchmark"] == benchmark) & (data.table["model"] == model)]
        for k, (resource, label, _) in enumerate(SWEEP_RESOURCES):
            r = c * len(SWEEP_RESOURCES) + k
            key = f"{resource}_ratio"
            for ax, setting in zip(grid[r], settings):
                rows = ax_.pair_rows(own[own["setting"] == setting], benchmark, model, specs)
                ratio_points(ax, rows, key, specs, y)
                if r == 0:
                    ax.set_title(f"{style.threshold_label(setting)} threshold")
                ax.set_xlabel(f"{label} / FC")
            grid[r][0].set_yticks(y, specs)
            if len(combos) > 1:
                grid[r][0].set_ylabel(ax_.combo_title(benchmark, model), fontweight="bold")
    if len(combos) == 1:
        title += f" ({ax_.combo_title(*combos[0])})"
    ax_.legend_top(fig, [], title=title)  # the y labels name every configuration
    footer = (
        "replay of the imported trajectories (agent's actions fixed) at each sweep setting's calibrated threshold; "
        f"resource-eligible runs, tasks counted on both sides; cost: the {data.meta.get('cost_method', 'configured')} "
        "method in local counts."
    )
    return notes.finish(fig, data.said(footer))
