"""Beyond the study: the cost decomposition. For each policy of the full comparison, its ratio to
FC split into the mechanical part (the FC trajectories replayed through the policy, agent's actions
held fixed: ``ctxpolicy replay``) and the behavioural factor (actual / mechanical), for billed
input cost, tokens and calls, with task-bootstrap intervals.

The numbers are ``ctxpolicy.metrics.decomposition.decompose``'s; the replay runs come from their
own table (``{results_dir}/tables/replay/runs.parquet``, written by workflow/rules/replay.smk).

Layout: one row per (benchmark, model) pair, one column per resource (``plt.subplots``: the
columns are three measures, not facets of one variable); the resource is the top row's title,
the pair the left column's y label. ``pairs`` restricts the rows.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from ctxpolicy.figures import axes as ax_
from ctxpolicy.figures import comparisons, inputs, notes, style
from ctxpolicy.figures.prepared import Prepared
from ctxpolicy.study import Study

STEM = "cost_decomposition"
REPLAY_TABLES = "replay"  # the replay runs' table directory, next to the study's scoped tables
RESOURCES = (("cost", "billed input cost"), ("tokens", "tokens"), ("calls", "calls"))
PARTS = (("mechanical", "o", "mechanical (replay)"), ("actual", "s", "actual (runs)"))


def replay_tables_dir(tables_dir: str | Path) -> Path:
    """``{tables_dir}/replay``, or the one beside a scope's own directory (``tables/full`` ->
    ``tables/replay``), whichever holds a runs table (the first when neither does)."""
    tables_dir = Path(tables_dir)
    candidates = [tables_dir / REPLAY_TABLES, tables_dir.parent / REPLAY_TABLES]
    return next((c for c in candidates if (c / "runs.parquet").exists()), candidates[0])


def read_replays(tables_dir: str | Path) -> pd.DataFrame:
    return inputs.read_runs(replay_tables_dir(tables_dir))


def compute(
    runs: pd.DataFrame,
    replays: pd.DataFrame,
    study: Study,
    *,
    n_boot: int,
    seed: int,
    pairs: list[tuple[str, str]] | None = None,
) -> Prepared:
    from ctxpolicy.metrics.decomposition import MEASURED_NOTE, UNPRICEABLE, decompose, missing_decompositions

    setting = study.section("full_comparison")["setting"]
    policies = comparisons.policies_of(study, "full_comparison")
    cost_method = study.cost_method
    combos = comparisons.pair_combos(study, "full_comparison", pairs)[0]
    runs, replays = inputs.select_pairs(runs, pairs), inputs.select_pairs(replays, pairs)
    frames, found, drawn = [], [], []
    if not combos:
        found.append("the config has no grid.full_comparison block with models and benchmarks.")
    if cost_method == UNPRICEABLE:
        return Prepared(pd.DataFrame(), [*found, MEASURED_NOTE], {"combos": combos, "cost_method": cost_method})
    if replays.empty:
        found.append(
            "no replay runs (ctxpolicy replay of the FC cells; workflow/rules/replay.smk): nothing to decompose."
        )
        return Prepared(pd.DataFrame(), found, {"combos": combos, "cost_method": cost_method})
    for benchmark, model in combos:
        own = comparisons.runs_of(runs, study, benchmark, model)
        own_replays = inputs.select(replays, benchmark=benchmark, model=model)
        if own.empty:
            found.append(notes.why_no_runs(model, benchmark))
            continue
        drawn.append(own)
        table = decompose(
            pd.concat([own, own_replays], ignore_index=True),
            model=model,
            benchmark=benchmark,
            cost_method=cost_method,
            n_boot=n_boot,
            seed=seed,
        )
        found += [
            f"{note} ({model} on {benchmark})."
            for note in missing_decompositions(own, own_replays, model=model, benchmark=benchmark)
            if any(p in note for p in policies) or "no replay runs" in note or "no FC replay" in note
        ]
        table = table[
            table["policy"].astype(str).isin(policies) & inputs.setting_matches(table["setting"], setting).to_numpy()
        ]
        if table.empty:
            found.append(f"no policy of the full comparison could be decomposed for {model} on {benchmark}.")
            continue
        frames.append(table)
    out = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    if not out.empty and (out["replay_summaries"] == "placeholder").any():
        found.append(
            "summary policies were replayed with placeholder summaries of the requested length "
            "(no summarizer endpoint): their mechanical ratios count sizes, not content."
        )
    meta = {"combos": combos, "cost_method": cost_method, "setting": setting}
    return Prepared(out, found, meta, n=notes.sample_size(drawn))


def plot(data: Prepared, name: str = STEM):
    title = ax_.figure_title(
        name,
        "cost decomposition: mechanical saving (replay) vs behavioural factor "
        f"({ax_.setting_words(data.meta)} "
        "threshold, D = 0.5)",
    )
    combos = ax_.combos_with_data(data, data.meta.get("combos") or [])
    if not combos:
        return notes.note_figure(title, data.notes)
    specs = ax_.policies_drawn(data)
    fig, grid = ax_.grid(len(combos), len(RESOURCES), row_height=0.2 * len(specs) + 0.7, sharey=True)
    y = np.arange(len(specs))[::-1].astype(float)
    for r, (row_axes, (benchmark, model)) in enumerate(zip(grid, combos)):
        rows = ax_.pair_rows(data.table, benchmark, model, specs)
        for ax, (resource, label) in zip(row_axes, RESOURCES):
            for k, (part, marker, _) in enumerate(PARTS):
                offset = 0.15 if k == 0 else -0.15
                hollow = part == "mechanical"
                ax_.interval_points(ax, rows, f"{resource}_{part}", specs, y + offset, marker=marker, hollow=hollow)
            factor = rows[f"{resource}_behavioural_est"].astype(float)
            ax_.right_of_rows(ax, y, [None if np.isnan(v) else f"×{v:.2f}" for v in factor], fontsize=6)
            ax.axvline(1.0, color="#666666", linewidth=0.6)
            ax.grid(axis="y", visible=False)
            if r == 0:
                ax.set_title(f"{label} / FC")
            notes.note_if_empty(ax, notes.about(data.notes, model, benchmark))
        row_axes[0].set_yticks(y, style.row_labels(specs))
        row_axes[0].set_ylabel(f"{model}\n{benchmark}", fontweight="bold")
    ax_.legend_top(
        fig,
        [
            Line2D(
                [],
                [],
                linestyle="none",
                marker=m,
                color="#555555",
                markerfacecolor="white" if part == "mechanical" else "#555555",
                label=lab,
            )
            for part, m, lab in PARTS
        ]
        + [
            Line2D(  # no marker: the factor is printed as text (×0.93) right of each panel
                [],
                [],
                linestyle="none",
                marker="none",
                label="×n right of a panel: behavioural factor = actual / mechanical",
            )
        ]
        + [  # the policies by colour only: the markers say mechanical or actual
            Line2D([], [], color=style.policy_color(s), linewidth=2.0, label=style.policy_label(s)) for s in specs
        ],
        ncol=4,
        title=title,
    )
    cost_method = data.meta.get("cost_method")
    footer = f"cost priced by one method for the runs and the replays: {cost_method}."
    return notes.finish(fig, data.said(footer))
