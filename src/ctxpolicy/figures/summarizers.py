"""Figure 19: summarizer sensitivity for the summarizing policies of ``grid.summarizer``.

For each policy (SU and TRC+SU in the study) and each summarizer: the resolve rate in
absolute terms with a 95 % task-bootstrap interval, and tokens, latency and billed cost
**relative to self-summarization** (the same policy with the agent's own model summarizing),
paired on the tasks both have eligible runs for, with that number of shared tasks (n) printed.

Layout (the study's): one row per (benchmark, model) of the block (the study has one: Qwen on
SWE-bench), four panels: resolve rate, then tokens, latency and billed cost relative to self;
policies on the x axis (primitive only; the title gives trigger, depth and threshold), one bar
per summarizer. ``plt.subplots`` rather than a seaborn grid: the four panels are four different
measures of one table, not facets of one variable. ``pairs`` restricts the rows.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from matplotlib.patches import Patch

from ctxpolicy.study import Pair, Study
from ctxpolicy.figures import axes as ax_
from ctxpolicy.figures import comparisons, inputs, notes, style
from ctxpolicy.figures.prepared import Prepared
from ctxpolicy.metrics.compare import resolve_rate_interval

SELF = "self"
RATIO_PANELS = (
    ("tokens_ratio", "tokens / self"),
    ("latency_ratio", "latency / self"),
    ("cost_ratio", "billed cost / self"),
)  # the cost label names the method in plot()
SUMMARIZER_HATCHES = ("", "//", "..", "xx", "\\\\")
SUMMARIZER_SHADES = ("#4D4D4D", "#999999", "#CCCCCC", "#777777", "#BBBBBB")


def _summarizer(value: Any) -> str:
    return SELF if value is None or pd.isna(value) or str(value) in ("", "None") else str(value)


def relative_to_self(
    own: pd.DataFrame,
    mine: pd.DataFrame,
    *,
    model: str,
    benchmark: str,
    n_boot: int,
    seed: int,
    method: str,
    attempts: int,
) -> dict:
    """Resource ratios of ``mine`` against the self-summarizing runs ``own`` of the same policy:
    the FC comparison with the self-summarizing cell in the reference's place."""
    both = pd.concat([own.assign(policy=style.FC), mine.assign(policy=mine["policy"].astype(str))], ignore_index=True)
    table = comparisons.compare_against_fc(
        both, model=model, benchmark=benchmark, n_boot=n_boot, seed=seed, attempts=attempts, cost_method=method
    )
    if table.empty:
        return {}
    row = table.iloc[0]
    return {
        f"{key}_{part}": row.get(f"{key}_{part}") for key, _ in RATIO_PANELS for part in ("est", "lo", "hi", "n_tasks")
    }


def compute(
    runs: pd.DataFrame, study: Study, *, n_boot: int, seed: int, pairs: list[tuple[str, str]] | None = None
) -> Prepared:
    block = study.section("summarizer")
    combos = comparisons.pair_combos(study, "summarizer", pairs)[0]
    runs = inputs.select_pairs(runs, pairs)
    policies = list(block["policies"])
    said: list[str] = []
    if not combos or not policies:
        why = (
            "the config has no summarizer comparison (grid.summarizer)."
            if not inputs.combos(study, "summarizer") or not policies
            else "the summarizer comparison has none of the pairs this figure shows."
        )
        return Prepared(pd.DataFrame(), [why])
    if not block["summarizers"]:
        said.append("the config lists no other summarizers: only the agent summarizing itself is shown.")
    method = study.cost_method
    attempts = study.attempts
    setting = block["setting"]
    rows, drawn = [], []
    for benchmark, model in combos:
        # the summarizer comparison's cells by id (the self-summarizing one is the sweep's shared
        # cell), never the sweep's other cells of the same policy and setting
        own = comparisons.design_runs(
            runs, study, "summarizer", Pair(model, benchmark), block["cohort"], reference=False
        )
        drawn.append(own)
        for policy in style.order_policies(policies):
            cells = own[own["policy"].astype(str) == policy]
            if cells.empty:
                said.append(f"no {policy} runs for {model} on {benchmark}.")
                continue
            by_summarizer = dict(tuple(cells.groupby(cells["summarizer"].map(_summarizer), sort=True)))
            self_runs = by_summarizer.get(SELF)
            if self_runs is None:
                said.append(
                    f"no self-summarizing {policy} runs for {model} on {benchmark}: ratios relative to self undefined."
                )
            for name in sorted(by_summarizer, key=lambda s: (s != SELF, s)):
                group = by_summarizer[name]
                row = {
                    "benchmark": benchmark,
                    "model": model,
                    "policy": policy,
                    "summarizer": name,
                    **resolve_rate_interval(group, attempts=attempts, n_boot=n_boot, seed=seed),
                    "cost_ratio_method": method,
                }
                if name != SELF and self_runs is not None:
                    row.update(
                        relative_to_self(
                            self_runs,
                            group,
                            model=model,
                            benchmark=benchmark,
                            n_boot=n_boot,
                            seed=seed,
                            method=method,
                            attempts=attempts,
                        )
                    )
                    if pd.isna(row.get("tokens_ratio_est")):
                        said.append(
                            f"no task with eligible runs for both {policy} summarized by {name} "
                            f"and by the agent itself ({model} on {benchmark}): ratios undefined."
                        )
                rows.append(row)
    return Prepared(
        pd.DataFrame(rows),
        said,
        {"combos": combos, "cost_method": method, "setting": setting, "policies": style.order_policies(policies)},
        n=notes.sample_size(drawn, comparisons.cohort_said(block["cohort"])),
    )


def plot(data: Prepared, name: str = "fig19"):
    policies = ", ".join(data.meta.get("policies") or [])
    title = f"{style.figure_name(name)}: summarizer sensitivity ({policies}; {ax_.setting_words(data.meta)} threshold)"
    combos = ax_.combos_with_data(data, data.meta.get("combos") or [])
    if not combos:
        return notes.note_figure(title, data.notes)
    summarizers = sorted(data.table["summarizer"].unique(), key=lambda s: (s != SELF, s))
    others = [s for s in summarizers if s != SELF]
    fig, grid = ax_.grid(len(combos), 1 + len(RATIO_PANELS), row_height=1.9)
    for r, (benchmark, model) in enumerate(combos):
        rows = data.table[(data.table["benchmark"] == benchmark) & (data.table["model"] == model)]
        specs = style.order_policies(rows["policy"])
        _bars(grid[r, 0], rows, specs, summarizers, summarizers, "resolve_rate", 100.0, 0.0)
        grid[r, 0].set_ylabel("resolve rate (%)")
        grid[r, 0].set_title(ax_.combo_title(benchmark, model), loc="left")
        for c, (key, label) in enumerate(RATIO_PANELS, start=1):
            ax = grid[r, c]
            if others and f"{key}_est" in rows:
                _bars(ax, rows, specs, others, summarizers, key, 1.0, 1.0, show_n=True)
            ax.axhline(1.0, color="#666666", linewidth=0.6)
            ax.set_ylabel(label + (f"\n({data.meta.get('cost_method')})" if key == "cost_ratio" else ""))
            notes.note_if_empty(ax, notes.about(data.notes, model, benchmark))
    ax_.legend_top(
        fig,
        [
            Patch(
                facecolor=SUMMARIZER_SHADES[k % 5],
                edgecolor="white",
                hatch=SUMMARIZER_HATCHES[k % 5],
                label=f"summarizer: {'agent itself' if s == SELF else s}",
            )
            for k, s in enumerate(summarizers)
        ],
        title=title,
    )
    return notes.finish(
        fig,
        data.said(),
        empty_panel=None if others else "no other summarizer: nothing to compare with self-summarization.",
    )


def _bars(
    ax,
    rows: pd.DataFrame,
    specs: list[str],
    names: list[str],
    every: list[str],
    key: str,
    scale: float,
    ref: float,
    show_n: bool = False,
) -> None:
    """Bars of ``names`` side by side per policy, each summarizer in its look from ``every``."""
    width = 0.8 / max(len(names), 1)
    for i, name in enumerate(names):
        k = every.index(name)
        part = rows[rows["summarizer"] == name].set_index("policy").reindex(specs)
        values = ax_.value(part, key, scale)
        x = np.arange(len(specs)) + (i - (len(names) - 1) / 2) * width
        ax.bar(
            x,
            values - ref,
            width,
            bottom=ref,
            yerr=ax_.interval(part, key, scale),
            color=SUMMARIZER_SHADES[k % 5],
            hatch=SUMMARIZER_HATCHES[k % 5],
            edgecolor="white",
            linewidth=0.4,
            error_kw={"elinewidth": 0.7, "ecolor": "#333333"},
        )
        if show_n and f"{key}_n_tasks" in part:
            for xi, n in zip(x, part[f"{key}_n_tasks"]):
                if pd.notna(n):
                    ax.annotate(
                        f"n={n:.0f}",
                        (xi, 0.0),
                        xycoords=("data", "axes fraction"),
                        xytext=(0, 2),
                        textcoords="offset points",
                        ha="center",
                        fontsize=5,
                        color="#444444",
                    )
    ax.set_xticks(range(len(specs)), [style.short_label(s) for s in specs])
