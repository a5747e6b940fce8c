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

TIME_LIMITED = "time_limited"


def sweep_policies(config: Mapping[str, Any]) -> list[str]:
    """The sweep's cells' policies, plus the full comparison's policies of the same primitive
    and trigger (the grid gives those cells to the full comparison, whose main cohort covers
    the sweep subset)."""
    swept = comparisons.policies_of(config, "sweeps")
    kinds = {style.parse_spec(p)[:2] for p in swept}
    extra = [p for p in comparisons.policies_of(config, "full_comparison")
             if style.parse_spec(p)[:2] in kinds]
    return style.order_policies(swept + extra)


def compute(runs: pd.DataFrame, config: Mapping[str, Any], *, n_boot: int, seed: int,
            slot: int = 0) -> Prepared:
    """``compare_to_fc`` rows of the sweep's ``slot``-th (benchmark, model) on the sweep tasks.

    Resolve rates count every run; the resource ratios already leave time-limited runs out
    (``ctxpolicy.metrics.compare.resource_eligible``), and so does ``meta["frequency"]``."""
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
    uncapped = runs[runs["outcome_class"].astype(str) != TIME_LIMITED]
    return Prepared(_with_depth(compared.table), compared.notes,
                    {"combo": combo, "settings": settings, "policies": policies,
                     "frequency": _compression_frequency(uncapped, config, combo)})


def _compression_frequency(runs: pd.DataFrame, config: Mapping[str, Any], combo) -> pd.DataFrame:
    """Mean compression events per agent call for each policy and setting (a description of
    the runs, not an estimate, so no interval)."""
    cohort = inputs.block(config, "sweeps").get("cohort", "sweep")
    own = comparisons.runs_of(runs, config, combo[0], combo[1], cohort)
    if own.empty:
        return pd.DataFrame(columns=["policy", "setting", "compression_freq", "threshold_tokens"])
    return (own.assign(policy=own["policy"].astype(str), setting=own["setting"].astype(str))
            .groupby(["policy", "setting"], as_index=False)
            .agg(compression_freq=("compression_freq", "mean"),
                 threshold_tokens=("threshold_tokens", "median")))


def _with_depth(table: pd.DataFrame) -> pd.DataFrame:
    if table.empty:
        return table
    return table.assign(policy=table["policy"].astype(str), setting=table["setting"].astype(str),
                        depth=[style.parse_spec(p)[2] for p in table["policy"].astype(str)])


def _threshold_labels(freq: pd.DataFrame, settings: list[str]) -> list[str]:
    labels = []
    for s in settings:
        t = freq.loc[freq["setting"] == s, "threshold_tokens"].dropna()
        labels.append(f"{s}\n({int(t.median()):,} tok)" if len(t) else s)
    return labels


def _line(ax, table: pd.DataFrame, policy: str, settings: list[str], column: str, depths) -> None:
    rows = table[table["policy"] == policy].set_index("setting").reindex(settings)
    if rows[column].isna().all():
        return
    depth = style.parse_spec(policy)[2]
    color, marker = (style.depth_style(depth, depths) if depth is not None
                     else (style.policy_color(policy), style.policy_marker(policy)))
    yerr = ax_.interval(rows, column)
    ax.errorbar(np.arange(len(settings)), rows[column].astype(float), yerr=yerr, color=color,
                marker=marker, linestyle="-" if depth is not None else "--", elinewidth=0.7,
                label=style.policy_label(policy))


def plot_fig3(data: Prepared):
    title = "Figure 3: threshold and depth sweep"
    if data.empty:
        return notes.note_figure(title, data.note_text() or "no data")
    settings, policies = data.meta["settings"], data.meta["policies"]
    freq = data.meta["frequency"]
    depths = [d for d in data.table["depth"].dropna().unique()]
    fig = plt.figure(figsize=(style.FULL_WIDTH, 3.6), layout="constrained")
    left, right = fig.subfigures(1, 2, width_ratios=[1.0, 1.05])
    axs = left.subplots(3, 1, sharex=True)
    panels = ((freq, "compression_freq", "compressions\nper call"),  # two lines: three short panels
              (data.table, "cost_ratio", "billed cost\n/ FC"),
              (data.table, "latency_ratio", "latency\n/ FC"))
    for ax, (table, column, label) in zip(axs, panels):
        for policy in policies:
            if not table.empty:
                _line(ax, table, policy, settings, column, depths)
        ax.set_ylabel(label)
        if column != "compression_freq":
            ax.axhline(1.0, color="#666666", linewidth=0.6)
    axs[-1].set_xticks(range(len(settings)), _threshold_labels(freq, settings))
    axs[-1].set_xlabel("threshold setting (time-limited runs excluded)")
    handles, labels = axs[1].get_legend_handles_labels()
    left.legend(handles, labels, loc="outside lower center", ncol=min(4, len(labels)))
    benchmark, model = data.meta["combo"]
    axs[0].set_title(f"{model} · {benchmark} · sweep subset", loc="left")
    _summary_table(right.subplots(), data.table, settings, policies)
    if data.notes:
        notes.footnote(fig, data.note_text())
    return fig


def summary_rows(table: pd.DataFrame, settings: list[str], policies: list[str]) -> pd.DataFrame:
    """Resolve rate, cost and latency per setting and policy, with the best across depths."""
    rows = []
    for s in settings:
        part = table[(table["setting"] == s) & table["policy"].isin(policies)]
        part = part.set_index("policy").reindex([p for p in policies if p in set(part["policy"])])
        if part.empty:
            continue
        best = {"resolve_rate": part["resolve_rate"].max(), "cost_ratio": part["cost_ratio"].min(),
                "latency_ratio": part["latency_ratio"].min()}
        for policy, r in part.iterrows():
            rows.append({"setting": s, "policy": policy, "resolve": r["resolve_rate"],
                         "cost": r["cost_ratio"], "latency": r["latency_ratio"],
                         "best_resolve": r["resolve_rate"] == best["resolve_rate"],
                         "best_cost": r["cost_ratio"] == best["cost_ratio"],
                         "best_latency": r["latency_ratio"] == best["latency_ratio"]})
    return pd.DataFrame(rows)


def _summary_table(ax, table: pd.DataFrame, settings: list[str], policies: list[str]) -> None:
    ax.axis("off")
    rows = summary_rows(table, settings, policies)
    if rows.empty:
        notes.note_on_axes(ax, "no sweep comparisons")
        return
    text = [[r.setting, style.policy_label(r.policy), f"{100 * r.resolve:.0f}%",
             f"{r.cost:.2f}", f"{r.latency:.2f}"] for r in rows.itertuples()]
    t = ax.table(cellText=text, colLabels=["setting", "policy", "resolve", "cost/FC", "lat./FC"],
                 loc="upper center", cellLoc="center", edges="horizontal")
    t.auto_set_font_size(False)
    t.set_fontsize(6.5)
    t.scale(1.0, 1.1)
    for i, r in enumerate(rows.itertuples(), start=1):
        for j, flag in ((2, r.best_resolve), (3, r.best_cost), (4, r.best_latency)):
            if flag:
                t[i, j].get_text().set_fontweight("bold")
    ax.set_title("all runs; bold: best across depths per setting", loc="left", fontsize=7)


ABLATION_ROWS = (("delta_pp", "Δ resolve (pp)", 0.0), ("token_ratio", "tokens / FC", 1.0),
                 ("latency_ratio", "latency / FC", 1.0), ("cost_ratio", "billed cost / FC", 1.0))


def plot_ablation(data: Prepared, name: str):
    title = f"{style.figure_name(name)}: depth and threshold ablation"
    if data.empty:
        return notes.note_figure(title, data.note_text() or "no data")
    settings, policies = data.meta["settings"], data.meta["policies"]
    fig, grid = ax_.grid(len(ABLATION_ROWS), len(settings), row_height=1.35, sharex=True, sharey="row")
    depths = sorted(d for d in data.table["depth"].dropna().unique())
    for c, setting in enumerate(settings):
        part = data.table[data.table["setting"] == setting]
        for r, (column, label, ref) in enumerate(ABLATION_ROWS):
            ax = grid[r, c]
            ax.axhline(ref, color="#666666", linewidth=0.6)
            for policy in policies:
                rows = part[part["policy"] == policy]
                if rows.empty:
                    continue
                depth = style.parse_spec(policy)[2]
                if depth is None:  # depth-invariant: a band across the depth axis
                    ax.axhline(float(rows[column].iloc[0]), color=style.policy_color(policy),
                               linestyle="--", linewidth=0.9)
                    continue
                ax_.policy_point(ax, depth, float(rows[column].iloc[0]), policy,
                                 yerr=ax_.interval(rows, column))
            for primitive in sorted({style.primitive_of(p) for p in policies
                                     if style.parse_spec(p)[2] is not None}):
                line = part[part["policy"].map(style.primitive_of) == primitive].sort_values("depth")
                if len(line) > 1:
                    ax.plot(line["depth"], line[column].astype(float), color=style.PRIMITIVE_COLORS.get(primitive, "#888888"),
                            linewidth=0.7, zorder=2)
            if c == 0:
                ax.set_ylabel(label)
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
    if data.notes:
        notes.footnote(fig, data.note_text())
    return fig


def _ablation_handles(policies: list[str]) -> list[Line2D]:
    by_depth = sorted({style.primitive_of(p) for p in policies if style.parse_spec(p)[2] is not None},
                      key=style.policy_sort_key)
    handles = [Line2D([], [], color=style.policy_color(p), marker=style.policy_marker(p),
                      label=f"{p}/Th/depth") for p in by_depth]
    handles += [Line2D([], [], color=style.policy_color(p), linestyle="--", label=style.policy_label(p))
                for p in policies if style.parse_spec(p)[2] is None]
    return handles
