"""Figure 21: change in agent calls relative to FC on shared solved tasks.

A task is solved by a policy when at least ⌈2/3·attempts⌉ of its attempts succeed (2 of 3),
for the policy and for FC alike; agent calls (summarizer calls excluded) are averaged over the
successful attempts within each task, then over the shared solved tasks; the bar is the
percentage change against FC with its paired 95 % task-bootstrap interval and n shared tasks.
Where fewer than ``MIN_TASKS_FOR_INTERVAL`` tasks are shared no interval is drawn, and the
note says so. Data columns: ``calls_change_{est,lo,hi,n_tasks}`` (fractions, as
``ctxpolicy compare`` prints them).

Layout (the study's): benchmarks in rows, models in columns (``axes.pair_facets``, a seaborn
``FacetGrid``); the x scale is shared within a benchmark and differs between benchmarks, as
call changes on Terminal-Bench are several times those on SWE-bench. Bars are drawn with
matplotlib (seaborn's barplot would draw its own intervals; ours are the metrics room's paired
bootstrap). ``pairs`` restricts the figure to some (model, benchmark) pairs.
"""

from __future__ import annotations


import numpy as np
import pandas as pd

from ctxpolicy.figures import axes as ax_
from ctxpolicy.figures import comparisons, notes, style
from ctxpolicy.figures.prepared import Prepared
from ctxpolicy.metrics.compare import solved_threshold
from ctxpolicy.metrics.cost_methods import DEFAULT as DEFAULT_METHOD
from ctxpolicy.study import Study

MIN_TASKS_FOR_INTERVAL = 3


def calls_change_metric(attempts: int):
    """Figure 21's metric for ``compare_block``: ``compare_to_baseline``'s ``calls_change`` (a task
    counts once ``attempts``' solved threshold of its attempts succeed, ``solved_threshold``), with
    the two means it compares (``calls_policy``, ``calls_fc``) and no interval below
    ``MIN_TASKS_FOR_INTERVAL`` shared tasks."""
    from ctxpolicy.metrics.compare import (
        CELL_COLUMNS,
        baseline_runs,
        calls_when_solved,
        compare_to_baseline,
        policy_cells,
        select,
    )

    need = solved_threshold(attempts)
    change = [f"calls_change_{part}" for part in ("est", "lo", "hi", "n_tasks")]

    def metric(runs, *, model, benchmark, n_boot, seed, cost_method=DEFAULT_METHOD, **_):
        table = compare_to_baseline(
            runs, model=model, benchmark=benchmark, attempts=attempts, cost_method=cost_method, n_boot=n_boot, seed=seed
        )
        if table.empty:
            return table
        selected = select(runs, model=model, benchmark=benchmark)
        base = baseline_runs(selected)
        fc = calls_when_solved(base, attempts, need)
        means = {}
        for cell, group in policy_cells(selected, exclude=base):
            policy = calls_when_solved(group, attempts, need)
            tasks = policy.index.intersection(fc.index)
            means[cell] = (float(policy[tasks].mean()), float(fc[tasks].mean())) if len(tasks) else (np.nan, np.nan)
        out = table.assign(
            calls_policy=table["cell"].map(lambda c: means[c][0]),
            calls_fc=table["cell"].map(lambda c: means[c][1]),
            solved_min=need,
        )
        out = out[[*(c for c in CELL_COLUMNS if c in out), "cell", "calls_policy", "calls_fc", *change, "solved_min"]]
        few = out["calls_change_n_tasks"] < MIN_TASKS_FOR_INTERVAL
        out.loc[few, ["calls_change_lo", "calls_change_hi"]] = np.nan
        return out

    return metric


def compute(
    runs: pd.DataFrame, study: Study, *, n_boot: int, seed: int, pairs: list[tuple[str, str]] | None = None
) -> Prepared:
    data = comparisons.compare_full_comparison(
        runs,
        study,
        n_boot=n_boot,
        seed=seed,
        metric=calls_change_metric(study.attempts),
        pairs=pairs,
    )
    if data.empty:
        return data
    table = data.table
    for (benchmark, model), rows in table.groupby(["benchmark", "model"], sort=False):
        n = rows["calls_change_n_tasks"]
        none = rows.loc[n == 0, "policy"].astype(str)
        few = rows.loc[(n > 0) & (n < MIN_TASKS_FOR_INTERVAL), "policy"].astype(str)
        if len(none):
            data.notes.append(
                f"no task solved by both FC and {', '.join(style.order_policies(none))} ({model} on {benchmark})."
            )
        if len(few):
            data.notes.append(
                f"no interval drawn for {', '.join(style.order_policies(few))} ({model} on "
                f"{benchmark}): fewer than {MIN_TASKS_FOR_INTERVAL} shared solved tasks."
            )
    return data


def plot(data: Prepared, name: str = "fig21"):
    title = (
        f"{style.figure_name(name)}: agent calls relative to FC on shared solved tasks "
        f"({ax_.setting_words(data.meta)} threshold, D = 0.5)"
    )
    combos = ax_.combos_with_data(data, data.meta.get("combos") or [])
    if not combos:
        return notes.note_figure(title, data.notes)
    specs = ax_.policies_drawn(data)
    fig, panels = ax_.policy_facets(combos, specs)
    y = np.arange(len(specs))[::-1]
    limits: dict[str, list[float]] = {}
    for (benchmark, model), ax in panels.items():
        rows = ax_.pair_rows(data.table, benchmark, model, specs, first=True)
        ax.barh(
            y,
            ax_.value(rows, "calls_change", 100.0),
            color=[style.policy_color(p) for p in specs],
            xerr=ax_.interval(rows, "calls_change", 100.0),
            height=0.65,
            error_kw={"elinewidth": 0.7, "ecolor": "#333333"},
        )
        ax.axvline(0, color="#666666", linewidth=0.6)
        ax_.policy_rows(ax, y, specs)
        ax_.right_of_rows(ax, y, ax_.counts(rows["calls_change_n_tasks"]))
        ends = np.concatenate(
            [
                rows[c].astype(float).to_numpy() * 100
                for c in ("calls_change_est", "calls_change_lo", "calls_change_hi")
                if c in rows
            ]
        )
        ends = ends[np.isfinite(ends)]
        if ends.size:
            low, high = limits.setdefault(benchmark, [0.0, 0.0])
            limits[benchmark] = [min(low, ends.min()), max(high, ends.max())]
    for (benchmark, _), ax in panels.items():  # one x scale per benchmark (not shared: see pair_facets)
        low, high = limits.get(benchmark, [0.0, 0.0])
        pad = 0.06 * max(high - low, 1.0)
        ax.set_xlim(low - pad, high + pad)
    ax_.hide_inner_labels(panels)
    fig.supxlabel("Δ agent calls vs FC (%); numbers right of each panel: n shared solved tasks", fontsize=7)
    ax_.legend_top(fig, ax_.policy_handles(specs), ncol=min(len(specs), 5), title=title)
    return notes.finish(fig, data.said())
