"""Figure 3 and Figures 9–15: the threshold and depth sweep.

The sweep's policies are the tunable primitives at every depth (including the full
comparison's depth at its setting, whose main-cohort runs cover the sweep subset) and
the depth-invariant policies, each at every threshold setting, on the sweep cohort's tasks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from ctxpolicy.figures import axes as ax_
from ctxpolicy.figures import comparisons, inputs, notes, style
from ctxpolicy.figures.prepared import Prepared
from ctxpolicy.metrics.sweep import all_attempts_summary, firings_per_attempt

TIME_LIMITED = "time_limited"


def sweep_policies(config: Mapping[str, Any]) -> list[str]:
    """The sweep's cells' policies, plus the full comparison's policies of the same primitive
    and trigger (the grid gives those cells to the full comparison, whose main cohort covers
    the sweep subset)."""
    swept = comparisons.policies_of(config, "sweeps")
    kinds = {(style.primitive_of(p), style.trigger_of(p)) for p in swept}
    extra = [p for p in comparisons.policies_of(config, "full_comparison")
             if (style.primitive_of(p), style.trigger_of(p)) in kinds]
    return style.order_policies(swept + extra)


def compute(runs: pd.DataFrame, config: Mapping[str, Any], *, n_boot: int, seed: int,
            slot: int = 0, calls: pd.DataFrame | None = None) -> Prepared:
    """``compare_to_fc`` rows of the sweep's ``slot``-th (benchmark, model) on the sweep tasks.

    Resolve rates count every run; the resource ratios leave time-limited runs out
    (``ctxpolicy.metrics.compare.resource_eligible``), and so does the compression frequency
    (``extra["frequency"]``: firings per attempt, from ``calls``). ``extra["summary"]`` is
    Figure 3's right-hand table, over all attempts (``all_attempts_summary``)."""
    combos = inputs.combos(config, "sweeps")
    if slot >= len(combos):
        have = ", ".join(f"{m} on {b}" for b, m in combos) or "none"
        return Prepared(pd.DataFrame(), [f"the config's sweep covers {len(combos)} model/benchmark "
                                         f"pair(s) ({have}); this figure is for pair {slot + 1}."])
    combo = combos[slot]
    policies = sweep_policies(config)
    settings = sorted(inputs.block(config, "sweeps").get("settings") or [], key=style.setting_sort_key)
    cohort = inputs.block(config, "sweeps").get("cohort", "sweep")
    compared = comparisons.compare_block(runs, config, "sweeps", n_boot=n_boot, seed=seed,
                                         combos=[combo], cohort=cohort, policies=policies)
    own = comparisons.runs_of(runs, config, combo[0], combo[1], cohort)
    frequency, freq_notes = firings_per_attempt(own[own["outcome_class"].astype(str) != TIME_LIMITED], calls)
    summary = all_attempts_summary(own, policies, settings, comparisons.cost_method(config),
                                   attempts=comparisons.planned_attempts(config))
    return Prepared(_with_depth(compared.table), compared.notes + freq_notes,
                    {"combo": combo, "settings": settings, "policies": policies,
                     "cost_method": comparisons.cost_method(config)},
                    {"frequency": frequency, "summary": summary})


def _with_depth(table: pd.DataFrame) -> pd.DataFrame:
    if table.empty:
        return table
    return table.assign(policy=table["policy"].astype(str), setting=table["setting"].astype(str),
                        depth=[style.depth_of(p) for p in table["policy"].astype(str)])


def _threshold_labels(runs_like: pd.DataFrame, settings: list[str]) -> list[str]:
    labels = []
    for s in settings:
        t = (runs_like.loc[runs_like["setting"] == s, "threshold_tokens"].dropna()
             if "threshold_tokens" in runs_like else pd.Series(dtype=float))
        labels.append(f"{s}\n({int(t.median()):,} tok)" if len(t) else s)
    return labels


def _line(ax, table: pd.DataFrame, policy: str, settings: list[str], key: str, depths) -> None:
    rows = table[table["policy"] == policy].drop_duplicates("setting").set_index("setting").reindex(settings)
    values = ax_.value(rows, key)
    if values.isna().all():
        return
    depth = style.depth_of(policy)
    ax.errorbar(np.arange(len(settings)), values, yerr=ax_.interval(rows, key), color=style.policy_color(policy),
                marker=style.policy_marker(policy),
                fillstyle=style.depth_fillstyle(depth, depths) if depth is not None else "full",
                linestyle=style.depth_linestyle(depth, depths) if depth is not None else "--", elinewidth=0.7,
                label=style.policy_label(policy))


def plot_fig3(data: Prepared):
    title = "Figure 3: threshold and depth sweep"
    summary = data.extra.get("summary", pd.DataFrame())
    if data.empty and summary.empty:
        return notes.note_figure(title, data.notes)
    settings, policies = data.meta["settings"], data.meta["policies"]
    freq = data.extra.get("frequency", pd.DataFrame())
    depths = [d for d in data.table["depth"].dropna().unique()] if not data.empty else []
    fig = plt.figure(figsize=(style.FULL_WIDTH, 3.6), layout="constrained")
    left, right = fig.subfigures(1, 2, width_ratios=[1.0, 1.05])
    axs = left.subplots(3, 1, sharex=True)
    panels = ((freq, "firings_per_attempt", "compressions\nper attempt"),  # two lines: three short panels
              (data.table, "cost_ratio", f"billed cost / FC\n({data.meta.get('cost_method')})"),
              (data.table, "latency_ratio", "latency\n/ FC"))
    for ax, (table, key, label) in zip(axs, panels):
        if not table.empty:
            for policy in policies:
                _line(ax, table, policy, settings, key, depths)
        ax.set_ylabel(label)
        if key != "firings_per_attempt":
            ax.axhline(1.0, color="#666666", linewidth=0.6)
    axs[-1].set_xticks(range(len(settings)), _threshold_labels(freq, settings))
    axs[-1].set_xlabel("threshold setting (time-limited runs excluded)")
    handles, labels = axs[0].get_legend_handles_labels()
    if labels:
        left.legend(handles, labels, loc="outside lower center", ncol=min(4, len(labels)))
    benchmark, model = data.meta["combo"]
    axs[0].set_title(f"{model} · {benchmark} · sweep subset", loc="left")
    _summary_table(right.subplots(), summary)
    gaps = [n for n in data.notes if "resource ratios" in n]
    return notes.finish(fig, data.notes, empty_panel=" ".join(gaps) or None)


YELLOW, GREEN = "#F6E27F", "#A8DDB5"


def _summary_table(ax, rows: pd.DataFrame) -> None:
    """Resolve rate, cost / FC and latency (s) over all attempts; yellow: best resolve, green:
    best cost, ○: best latency, across depths within each primitive and setting."""
    ax.axis("off")
    if rows.empty:
        notes.note_on_axes(ax, "no sweep runs to tabulate.")
        return

    def fmt(v, pattern):
        return "–" if pd.isna(v) else pattern.format(v)

    text = [[r.setting, style.policy_label(r.policy), fmt(100 * r.resolve_rate, "{:.0f}%"),
             fmt(r.cost_ratio_all, "{:.2f}"), fmt(r.latency_s, "{:.0f}") + (" ○" if r.best_latency else "")]
            for r in rows.itertuples()]
    t = ax.table(cellText=text, colLabels=["setting", "policy", "resolve", "cost/FC", "latency (s)"],
                 loc="upper center", cellLoc="center", edges="horizontal")
    t.auto_set_font_size(False)
    t.set_fontsize(6.5)
    t.scale(1.0, 1.1)
    for i, r in enumerate(rows.itertuples(), start=1):
        if r.best_resolve:
            t[i, 2].set_facecolor(YELLOW)
        if r.best_cost:
            t[i, 3].set_facecolor(GREEN)
    ax.set_title("all attempts; best across depths per primitive and setting:\n"
                 "yellow resolve, green cost, ○ latency", loc="left", fontsize=7)


ABLATION_ROWS = (("resolve_delta", "Δ resolve (pp)", 0.0, 100.0), ("tokens_ratio", "tokens / FC", 1.0, 1.0),
                 ("latency_ratio", "latency / FC", 1.0, 1.0), ("cost_ratio", "billed cost / FC", 1.0, 1.0))


def plot_ablation(data: Prepared, name: str):
    title = f"{style.figure_name(name)}: depth and threshold ablation"
    if data.empty:
        return notes.note_figure(title, data.notes)
    settings, policies = data.meta["settings"], data.meta["policies"]
    fig, grid = ax_.grid(len(ABLATION_ROWS), len(settings), row_height=1.35, sharex=True, sharey="row")
    depths = sorted(d for d in data.table["depth"].dropna().unique())
    for c, setting in enumerate(settings):
        part = data.table[data.table["setting"] == setting]
        for r, (key, label, ref, scale) in enumerate(ABLATION_ROWS):
            ax = grid[r, c]
            ax.axhline(ref, color="#666666", linewidth=0.6)
            for policy in policies:
                rows = part[part["policy"] == policy].iloc[:1]
                if rows.empty or ax_.value(rows, key).isna().all():
                    continue
                depth = style.depth_of(policy)
                if depth is None:  # depth-invariant: a dashed level across the depth axis
                    ax.plot([min(depths, default=0.0), max(depths, default=1.0)],
                            [float(ax_.value(rows, key, scale).iloc[0])] * 2,
                            color=style.policy_color(policy), linestyle="--", linewidth=0.9)
                    continue
                ax_.policy_point(ax, depth, float(ax_.value(rows, key, scale).iloc[0]), policy,
                                 yerr=ax_.interval(rows, key, scale))
            for primitive in sorted({style.primitive_of(p) for p in policies
                                     if style.depth_of(p) is not None}):
                line = part[part["policy"].map(style.primitive_of) == primitive].sort_values("depth")
                if len(line) > 1:
                    ax.plot(line["depth"], ax_.value(line, key, scale),
                            color=style.PRIMITIVE_COLORS.get(primitive, "#888888"), linewidth=0.7, zorder=2)
            if c == 0:
                ax.set_ylabel(f"{label}\n({data.meta.get('cost_method')})" if key == "cost_ratio" else label)
            if r == 0:
                ax.set_title(f"{setting} threshold", loc="left")
            if r == len(ABLATION_ROWS) - 1:
                ax.set_xlabel("depth")
                if depths:
                    ax.set_xticks(depths)
    benchmark, model = data.meta["combo"]
    fig.suptitle(f"{model} · {benchmark}", x=0.02, ha="left")
    handles = _ablation_handles(policies)
    ax_.legend_top(fig, handles)
    gaps = [n for n in data.notes if "resource ratios" in n]
    return notes.finish(fig, data.notes, empty_panel=" ".join(gaps) or None)


def _ablation_handles(policies: list[str]) -> list[Line2D]:
    by_depth = sorted({style.primitive_of(p) for p in policies if style.depth_of(p) is not None},
                      key=style.policy_sort_key)
    handles = [Line2D([], [], color=style.policy_color(p), marker=style.policy_marker(p),
                      label=f"{p}/Th/depth") for p in by_depth]
    handles += [Line2D([], [], color=style.policy_color(p), linestyle="--", label=style.policy_label(p))
                for p in policies if style.depth_of(p) is None]
    return handles


def compute_ablation(runs: pd.DataFrame, config: Mapping[str, Any], *, n_boot: int, seed: int,
                     slot: int = 0) -> Prepared:
    """Figures 9–15: ``compute`` without Figure 3's frequency curves and table (not drawn here)."""
    data = compute(runs, config, n_boot=n_boot, seed=seed, slot=slot)
    data.extra = {}
    return data
