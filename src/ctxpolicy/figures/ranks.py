"""Figure 5: (a) within-model ranks of the policies on resolve rate, latency and billed cost,
best values outlined; (b) the study's paired resolve-rate differences (first policy minus
second) on each benchmark and model, with 95 % task-bootstrap intervals, ∗ where the interval
excludes zero."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.patches import Rectangle

from ctxpolicy.figures import axes as ax_
from ctxpolicy.figures import comparisons, inputs, notes, style
from ctxpolicy.figures.prepared import Prepared
from ctxpolicy.threshold_settings import PRIMARY

# (A, B) by primitive, drawn as A − B: the study's four pairs (S is the structured summary).
PAIRS = (("S-p", "S"), ("TRC+S", "S"), ("OTRC", "TRC"), ("OTRC+S-p", "OTRC"))
RANKED = (("resolve_rate", "resolve", False), ("latency_ratio_est", "latency", True),
          ("cost_ratio_est", "cost", True))
SIGNIFICANT = "∗"
RANK_CMAP = "viridis_r"


def compute(runs: pd.DataFrame, config: Mapping[str, Any], *, n_boot: int, seed: int) -> Prepared:
    block = inputs.block(config, "full_comparison")
    setting = block.get("setting", PRIMARY)
    compared = comparisons.compare_block(runs, config, "full_comparison", n_boot=n_boot, seed=seed,
                                         setting=setting,
                                         policies=comparisons.policies_of(config, "full_comparison"))
    ranks = rank_table(compared.table) if not compared.empty else pd.DataFrame()
    pairs, pair_notes = paired(runs, config, compared.table, n_boot=n_boot, seed=seed)
    return Prepared(ranks, compared.notes + pair_notes,
                    {"combos": compared.meta["combos"], "pairs": pairs, "cost_method": compared.meta["cost_method"]},
                    {"ranks": ranks, "pairs": pairs})


def rank_table(compared: pd.DataFrame) -> pd.DataFrame:
    """Per (benchmark, model): FC and each policy ranked on each measure (1 = best)."""
    frames = []
    for (benchmark, model), rows in compared.groupby(["benchmark", "model"], sort=False):
        fc = pd.DataFrame([{"policy": style.FC, "resolve_rate": rows["baseline_resolve_rate"].iloc[0],
                            "latency_ratio_est": 1.0, "cost_ratio_est": 1.0}])
        both = pd.concat([fc, rows[["policy", "resolve_rate", "latency_ratio_est", "cost_ratio_est"]]],
                         ignore_index=True).assign(policy=lambda t: t["policy"].astype(str))
        for column, _, ascending in RANKED:
            both[f"{column}_rank"] = both[column].rank(ascending=ascending, method="min")
        frames.append(both.assign(benchmark=benchmark, model=model))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _cell_of(compared: pd.DataFrame, primitive: str) -> str | None:
    rows = compared[compared["policy"].astype(str).map(style.primitive_of) == primitive]
    return str(rows["cell"].iloc[0]) if len(rows) else None


def paired(runs: pd.DataFrame, config: Mapping[str, Any], compared: pd.DataFrame, *,
           n_boot: int, seed: int) -> tuple[pd.DataFrame, list[str]]:
    from ctxpolicy.metrics.compare import paired_differences

    frames, missing = [], set()
    for (benchmark, model), rows in (compared.groupby(["benchmark", "model"], sort=False)
                                     if not compared.empty else []):
        pairs, labels = [], []
        for a, b in PAIRS:
            ca, cb = _cell_of(rows, a), _cell_of(rows, b)
            if ca and cb:
                pairs.append((ca, cb))
                labels.append(f"{a} − {b}")
            else:
                missing.add(f"{a} vs {b}")
        if not pairs:
            continue
        own = comparisons.runs_of(runs, config, benchmark, model)
        table = paired_differences(own, model=model, benchmark=benchmark, pairs=pairs,
                                   n_boot=n_boot, seed=seed)
        frames.append(table.assign(benchmark=benchmark, model=model, pair=labels))
    note = [f"pairs without both policies in the config or runs: {', '.join(sorted(missing))}."] if missing else []
    if frames:  # a pair whose policies share no task has no difference to draw
        undefined = [p for f in frames for p in f.loc[f["diff_pp"].isna(), "pair"]]
        if undefined:
            note.append(f"no shared task for {', '.join(sorted(set(undefined)))}: no difference drawn.")
    return (pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()), note


def plot(data: Prepared):
    title = "Figure 5: policy ranks and paired differences"
    if data.empty:
        return notes.note_figure(title, data.notes)
    combos = ax_.combos_with_data(data, data.meta["combos"])
    specs = style.order_policies(data.table["policy"])
    fig = plt.figure(figsize=(style.FULL_WIDTH, 0.26 * len(specs) + 2.6), layout="constrained")
    top, bottom = fig.subfigures(2, 1, height_ratios=[0.26 * len(specs) + 0.8, 1.8])
    _heatmap(top.subplots(), data.table, combos, specs)
    top.suptitle(f"(a) rank within model (1 = best; outlined: best; cost: {data.meta.get('cost_method')} method)",
                 x=0.01, ha="left", fontsize=8)
    pairs = data.meta["pairs"]
    axs = bottom.subplots(1, max(1, len(combos)), squeeze=False, sharey=True)[0]
    bottom.suptitle(f"(b) paired resolve-rate differences (pp, first − second), 95 % intervals; "
                    f"{SIGNIFICANT} excludes 0",
                    x=0.01, ha="left", fontsize=8)
    for ax, (benchmark, model) in zip(axs, combos):
        rows = pairs[(pairs["benchmark"] == benchmark) & (pairs["model"] == model)] if not pairs.empty else pairs
        ax.set_title(ax_.combo_title(benchmark, model), loc="left")
        if rows.empty:
            notes.note_on_axes(ax, "no policy pair of the study in this comparison", width=28)
            continue
        y = np.arange(len(rows))[::-1]
        ax.errorbar(rows["diff_pp"], y, xerr=ax_.interval(rows, "diff_pp"), fmt="o", color="#333333",
                    elinewidth=0.8, markersize=4)
        for yi, (_, r) in zip(y, rows.iterrows()):
            if r["excludes_zero"]:
                ax.annotate(SIGNIFICANT, (r["diff_pp_hi"], yi), xytext=(3, 0), textcoords="offset points",
                            va="center", fontsize=7)
        ax.axvline(0, color="#666666", linewidth=0.6)
        ax.set_yticks(y, rows["pair"])
        ax.set_xlabel("Δ resolve (pp)")
        ax.grid(axis="y", visible=False)
    return notes.finish(fig, data.notes)


def _heatmap(ax, table: pd.DataFrame, combos, specs) -> None:
    columns = [(b, m, c, label) for b, m in combos for c, label, _ in RANKED]
    grid = np.full((len(specs), len(columns)), np.nan)
    for j, (b, m, c, _) in enumerate(columns):
        rows = table[(table["benchmark"] == b) & (table["model"] == m)].set_index("policy")
        grid[:, j] = rows[f"{c}_rank"].reindex(specs).to_numpy(dtype=float)
    ax.imshow(np.ma.masked_invalid(grid), cmap=RANK_CMAP, aspect="auto", vmin=1,
              vmax=max(2, np.nanmax(grid) if np.isfinite(grid).any() else 2))
    for i in range(len(specs)):
        for j in range(len(columns)):
            if np.isfinite(grid[i, j]):
                ax.text(j, i, f"{grid[i, j]:.0f}", ha="center", va="center", fontsize=6,
                        color="black" if grid[i, j] <= np.nanmax(grid) / 2 else "white")
                if grid[i, j] == 1:
                    ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="black",
                                           linewidth=1.2))
    ax.set_xticks(range(len(columns)), [label for *_, label in columns])
    ax.set_yticks(range(len(specs)), [style.policy_label(s) for s in specs])
    for k, (b, m) in enumerate(combos):
        ax.text(3 * k + 1, -0.8, ax_.combo_title(b, m), ha="center", va="bottom", fontsize=7)
        if k:
            ax.axvline(3 * k - 0.5, color="white", linewidth=2)
    ax.grid(False)
    ax.tick_params(length=0)
