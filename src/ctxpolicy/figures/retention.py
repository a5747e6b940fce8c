"""Beyond the study: information retention per compression step, by policy and depth.

Left: anchors (file paths, symbols, errors, tests, commands, line numbers) at risk in a step
that are still there afterwards, verbatim (solid) or only in a summary (hatched). Right:
constraints (rules given to the agent) at risk that were kept or restated. Rates are ratios of
sums over a policy's steps with task-bootstrap 95% intervals (``ctxpolicy.analysis.summary``),
drawn from ``events.parquet`` (``ctxpolicy audit``). Steps of the primary threshold setting
(and of policies without one), of the cells where the agent is its own summarizer (the
summarizer comparison's cells share the policy's name but are Figure 19's); the audit's
definitions are in docs/analysis.md.

Layout: per (benchmark, model) pair, benchmarks in rows and models in columns
(``axes.pair_facets``); anchors, then (when any step had a constraint at risk) constraints as a
second block of rows. ``pairs`` restricts the pairs.
"""

from __future__ import annotations


import numpy as np
import pandas as pd
from matplotlib.patches import Patch

from ctxpolicy.figures import axes as ax_
from ctxpolicy.figures import inputs, notes, style
from ctxpolicy.figures.prepared import Prepared
from ctxpolicy.threshold_settings import PRIMARY
from ctxpolicy.study import Study

SETTING = PRIMARY
GROUP = ("benchmark", "model", "policy", "primitive", "depth")


def event_combos(events: pd.DataFrame, study: Study) -> list[tuple[str, str]]:
    """(benchmark, model) pairs with audited steps: config order first, then any others."""
    present = set(zip(events["benchmark"].astype(str), events["model"].astype(str)))
    ordered = [(b, m) for m in study.models for b in study.benchmarks]
    return [c for c in ordered if c in present] + sorted(present - set(ordered))


def policy_rates(
    events: pd.DataFrame,
    study: Study,
    *,
    n_boot: int,
    seed: int,
    what: str,
    pairs: list[tuple[str, str]] | None = None,
) -> Prepared:
    """``by_policy`` over the primary-setting steps, with notes on what is missing; ``pairs``
    (model, benchmark) keeps only those pairs' steps."""
    from ctxpolicy.analysis.summary import by_policy

    events = inputs.select_pairs(events, pairs)
    if events.empty:
        return Prepared(
            pd.DataFrame(),
            [
                f"no audited compression steps (events.parquet is missing or "
                f"empty: run `ctxpolicy audit`), so no {what} to show."
            ],
        )
    own = own_summarizer(events)
    chosen = events[own & inputs.setting_matches(events["threshold_setting"], SETTING).to_numpy()]
    table = by_policy(chosen, n_boot=n_boot, seed=seed, group=GROUP)
    data = Prepared(
        table, meta={"combos": event_combos(chosen, study)}, n=notes.sample_size(chosen, " (with compression steps)")
    )
    if not own.all():
        data.notes.append(OTHER_SUMMARIZERS)
    if len(chosen) < own.sum():
        data.notes.append(f"steps of other threshold settings than {SETTING} not shown.")
    return data


OTHER_SUMMARIZERS = (
    "steps of the summarizer comparison's cells (another model writes the summaries; Figure 19) "
    "not shown: each row is a policy with the agent as its own summarizer."
)


def own_summarizer(events: pd.DataFrame) -> np.ndarray:
    """True for the steps of cells where the agent summarizes for itself (``summarizer`` empty):
    a policy's row never pools the summarizer comparison's cells, which share its name."""
    if "summarizer" not in events:
        return np.ones(len(events), dtype=bool)
    return events["summarizer"].isna().to_numpy()


def compute(
    events: pd.DataFrame,
    study: Study,
    *,
    n_boot: int,
    seed: int,
    pairs: list[tuple[str, str]] | None = None,
) -> Prepared:
    data = policy_rates(events, study, n_boot=n_boot, seed=seed, what="retention", pairs=pairs)
    if not data.empty and not (data.table["n_events"] > 0).any():
        data.notes.append("no compression steps.")
    if not data.empty and data.table["constraint_retention"].isna().all():
        data.notes.append(NO_CONSTRAINTS)
    return data


NO_CONSTRAINTS = (
    "no step had a constraint at risk (rules stated in the task are protected by every "
    "policy), so there is no constraint retention to draw."
)


def _bars(ax, rows: pd.DataFrame, y: np.ndarray, specs: list[str], column: str, hatched: str | None) -> None:
    colors = [style.policy_color(p) for p in specs]
    values = rows[column].astype(float).fillna(0.0)
    if hatched:
        solid = rows[hatched].astype(float).fillna(0.0)
        ax.barh(y, solid, height=0.7, color=colors, edgecolor="white", linewidth=0.3)
        ax.barh(
            y,
            values - solid,
            left=solid,
            height=0.7,
            color=colors,
            alpha=0.45,
            hatch="//",
            edgecolor="white",
            linewidth=0.3,
        )
    else:
        ax.barh(y, values, height=0.7, color=colors, edgecolor="white", linewidth=0.3)
    err = ax_.interval(rows, column)
    if err is not None:
        ax.errorbar(values, y, xerr=err, fmt="none", ecolor="#333333", elinewidth=0.7)
    for yy, (n, v) in zip(y, zip(rows["n_events"], rows[column])):
        if pd.isna(v):
            ax.text(0.02, yy, "none at risk" if n else "no steps", va="center", fontsize=6, color="#666666")


PANELS = (
    ("anchor_retention", "anchor_verbatim", "anchors at risk that survive"),
    ("constraint_retention", None, "constraints at risk that survive"),
)


def plot(data: Prepared, name: str = "retention"):
    title = ax_.figure_title(
        name, f"retention per compression step: anchors and constraints ({SETTING} threshold and policies without one)"
    )
    combos = ax_.combos_with_data(data, data.meta.get("combos") or [])
    if not combos:
        return notes.note_figure(title, data.notes)
    specs = ax_.policies_drawn(data)
    panels_of = [p for p in PANELS if not data.table[p[0]].isna().all()] or PANELS[:1]
    # one block of benchmark rows per measure: a FacetGrid over (measure, benchmark) × model
    rows_of = [(label, b) for _, _, label in panels_of for b in dict.fromkeys(b for b, _ in combos)]
    models = list(dict.fromkeys(m for _, m in combos))
    fig, panels = ax_.pair_facets(
        [(f"{b}\n{label}", m) for label, b in rows_of for m in models if (b, m) in set(combos)],
        panel_height=max(1.3, 0.2 * len(specs) + 0.6),
        width=min(style.FULL_WIDTH, 2.4 * len(models) + 0.9),
    )
    y = np.arange(len(specs))[::-1]
    for (row_name, model), ax in panels.items():
        benchmark, label = row_name.split("\n", 1)
        column, hatched, _ = next(p for p in panels_of if p[2] == label)
        rows = ax_.pair_rows(data.table, benchmark, model, specs)
        rows["n_events"] = rows["n_events"].fillna(0)
        if rows[column].isna().all():
            notes.note_on_axes(
                ax,
                NO_CONSTRAINTS
                if column == "constraint_retention"
                else f"no anchor at risk in any step of {model} on {benchmark}.",
                width=30,
            )
            continue
        _bars(ax, rows, y, specs, column, hatched)
        ax.set_xlim(0, 1.02)
        ax_.policy_rows(ax, y, specs)
    ax_.hide_inner_labels(panels)
    fig.supxlabel("share of the items at risk in a step that survive it (row label: which items)", fontsize=7)
    ax_.legend_top(
        fig,
        [
            Patch(facecolor="#808080", label="kept verbatim"),
            Patch(facecolor="#808080", alpha=0.45, hatch="//", label="only in a summary"),
        ]
        + ax_.policy_handles(specs),
        ncol=5,
        title=title,
    )
    return notes.finish(fig, data.said())
