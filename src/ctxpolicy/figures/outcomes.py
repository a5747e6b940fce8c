"""Figure 20: how every planned attempt ended at the primary configurations, stacked to 100 %.

Each bar is one policy's **planned** attempts: the cohort's tasks × the config's ``attempts``
(300 per SWE-bench policy, 120 per Terminal-Bench policy at paper scale). Classes
(``ctxpolicy.metrics.outcomes``), successful verdicts first: success, time-limited,
step-limited, submitted but unsuccessful, other or missing (an attempt never recorded is
missing). A Terminal-Bench run that the harness timed out counts as time-limited even when
the agent recorded no time limit. Segments carry their percentage where the label fits inside
the segment (narrower segments stay unlabelled, as the x-axis label says; every share is in the
``.data.csv``); the panel title gives each bar's n.

Layout: one panel per (benchmark, model) pair of the full comparison, benchmarks in rows and
models in columns (``axes.pair_facets``, a seaborn ``FacetGrid``); the bars are drawn with
matplotlib because seaborn does not stack bars. ``pairs`` restricts the figure to some pairs
(``inputs.parse_pairs``), e.g. an appendix variant ``fig20-devstral-swebench``.
"""

from __future__ import annotations


import numpy as np
import pandas as pd
from matplotlib.patches import Patch

from ctxpolicy.figures import axes as ax_
from ctxpolicy.figures import comparisons, inputs, notes, style
from ctxpolicy.figures.prepared import Prepared
from ctxpolicy.metrics.outcomes import planned_outcome_counts
from ctxpolicy.threshold_settings import PRIMARY
from ctxpolicy.study import Study

LABEL_PAD_PX = 2.0  # a percentage label is drawn only where it fits inside its segment with this margin


def compute(
    runs: pd.DataFrame,
    study: Study,
    *,
    n_boot: int = 0,
    seed: int = 0,
    pairs: list[tuple[str, str]] | None = None,
) -> Prepared:
    block = study.section("full_comparison")
    wanted = [style.FC, *comparisons.policies_of(study, "full_comparison")]
    attempts = study.attempts
    cohort = block.get("cohort", "main")
    combos = comparisons.pair_combos(study, "full_comparison", pairs)[0]
    runs = inputs.select_pairs(runs, pairs)
    rows, said, drawn = [], [], []
    for benchmark, model in combos:
        own = comparisons.runs_of(runs, study, benchmark, model, cohort)
        own = own[inputs.setting_matches(own["setting"], block.get("setting", PRIMARY)) & own["summarizer"].isna()]
        tasks = comparisons.cohort_tasks(study, benchmark, cohort)
        if tasks is None:
            tasks = set(own["task_id"].astype(str))
            said.append(
                f"the config names no {cohort} cohort for {benchmark}: the planned tasks are "
                f"those with runs ({len(tasks)})."
            )
        if own.empty:
            said.append(f"no runs for {model} on {benchmark}: every planned attempt is missing.")
        if not tasks:
            continue
        drawn.append(own)
        for policy in wanted:
            counts = planned_outcome_counts(own[own["policy"].astype(str) == policy], sorted(tasks), attempts)
            n = len(tasks) * attempts
            for outcome, k in counts.items():
                rows.append(
                    {
                        "benchmark": benchmark,
                        "model": model,
                        "policy": policy,
                        "outcome_class": outcome,
                        "n": k,
                        "planned": n,
                        "share": k / n,
                    }
                )
    return Prepared(
        pd.DataFrame(rows),
        said,
        {"combos": combos, "attempts": attempts, "setting": block.get("setting", "primary")},
        n=notes.sample_size(drawn, comparisons.cohort_said(cohort)),
    )


def plot(data: Prepared, name: str = "fig20"):
    title = (
        f"{style.figure_name(name)}: run outcomes at the primary configurations "
        f"({ax_.setting_words(data.meta)} threshold, D = 0.5)"
    )
    combos = ax_.combos_with_data(data, data.meta.get("combos") or [])
    if not combos:
        return notes.note_figure(title, data.notes)
    specs = style.order_policies(data.table["policy"])
    fig, panels = ax_.policy_facets(combos, specs, per_model=2.6, margin=0.8)
    y = np.arange(len(specs))[::-1]
    labels = []
    for (benchmark, model), ax in panels.items():
        rows = data.table[(data.table["benchmark"] == benchmark) & (data.table["model"] == model)]
        shares = (
            rows.pivot_table(index="policy", columns="outcome_class", values="share", aggfunc="sum")
            .reindex(index=specs, columns=list(style.OUTCOME_ORDER))
            .fillna(0.0)
        )
        planned = rows.groupby("policy")["planned"].first().reindex(specs).dropna().unique()
        left = np.zeros(len(specs))
        for outcome in style.OUTCOME_ORDER:
            values = 100 * shares[outcome].to_numpy()
            bars = ax.barh(
                y, values, left=left, color=style.OUTCOME_COLORS[outcome], height=0.75, edgecolor="white", linewidth=0.3
            )
            for bar, v in zip(bars, values):
                if v > 0:
                    labels.append(
                        (
                            bar,
                            ax.text(
                                bar.get_x() + v / 2,
                                bar.get_y() + bar.get_height() / 2,
                                f"{v:.0f}%",
                                ha="center",
                                va="center",
                                fontsize=5,
                            ),
                        )
                    )
            left += values
        ax.set_xlim(0, 100)
        ax_.policy_rows(ax, y, specs)
        n = f"n = {planned[0]:.0f} per bar" if len(planned) == 1 else "n differs per bar (data.csv)"
        ax.set_title(f"{model} ({n})")
    ax_.hide_inner_labels(panels)
    fig.supxlabel("planned attempts (%); segments too narrow for their percentage are unlabelled", fontsize=7)
    ax_.legend_top(
        fig,
        [Patch(color=style.OUTCOME_COLORS[o], label=style.OUTCOME_LABELS[o]) for o in style.OUTCOME_ORDER],
        title=title,
    )
    fig = notes.finish(fig, data.said())
    _drop_labels_that_do_not_fit(fig, labels)
    return fig


def _drop_labels_that_do_not_fit(fig, labels) -> None:
    """Remove each percentage label wider or taller than its segment (measured after the layout,
    with the renderer the figure is saved with; the same inputs always give the same labels)."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    for bar, text in labels:
        box, room = text.get_window_extent(renderer), bar.get_window_extent(renderer)
        if box.width + 2 * LABEL_PAD_PX > room.width or box.height > room.height + LABEL_PAD_PX:
            text.remove()
