"""Figure 2: success and resources against FC, per model and benchmark.

x: token usage relative to FC. Panels: resolve-rate change (pp, all runs), latency relative
to FC, billed input cost relative to FC (paired ratios on shared eligible tasks), each with
95 % task-bootstrap intervals. Grey: billed cost above FC. Dotted: savings proportional to
token savings (y = x).
"""

from __future__ import annotations


import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from ctxpolicy.figures import axes as ax_
from ctxpolicy.figures import comparisons, inputs, notes, style
from ctxpolicy.figures.prepared import Prepared
from ctxpolicy.study import Study

# (key, label, reference line, scale): resolve_delta is a fraction, drawn in percentage points
PANELS = (
    ("resolve_delta", "Δ resolve rate (pp)", 0.0, 100.0),
    ("latency_ratio", "latency / FC", 1.0, 1.0),
    ("cost_ratio", "billed input cost / FC", 1.0, 1.0),
)


def compute(
    runs: pd.DataFrame, study: Study, *, n_boot: int, seed: int, pairs: list[tuple[str, str]] | None = None
) -> Prepared:
    """``pairs``: the (model, benchmark) pairs to draw (None: every pair of the full comparison)."""
    combos, said = comparisons.pair_combos(study, "full_comparison", pairs)
    own = inputs.select_pairs(runs, pairs)
    data = comparisons.compare_full_comparison(own, study, n_boot=n_boot, seed=seed, combos=combos)
    data.notes = said + data.notes
    data.meta["thresholds"] = ax_.threshold_table(own)
    data.meta["setting"] = study.section("full_comparison")["setting"]
    return data


def _long(data: Prepared, combos) -> pd.DataFrame:
    """One row per (pair, panel, policy): what each facet draws."""
    frames = []
    for benchmark, model in combos:
        rows = data.table[(data.table["benchmark"] == benchmark) & (data.table["model"] == model)]
        rows = rows.assign(policy=rows["policy"].astype(str)).reset_index(drop=True)
        row_label = (
            f"{model}\n{benchmark}\n"
            f"{ax_.pair_threshold_label(data.meta.get('thresholds') or {}, benchmark, model, data.meta.get('setting'))}"
        )
        x = ax_.value(rows, "tokens_ratio")
        xerr = ax_.interval(rows, "tokens_ratio")
        for key, _label, _ref, scale in PANELS:
            y = ax_.value(rows, key, scale)
            yerr = ax_.interval(rows, key, scale)
            hollow = x.isna() & (key == "resolve_delta")
            frames.append(
                pd.DataFrame(
                    {
                        "pair": row_label,
                        "panel": _panel_title(key, data),
                        "key": key,
                        "policy": rows["policy"],
                        "x": x.where(~hollow, 1.0),
                        "y": y,
                        "hollow": hollow,
                        "xlo": np.nan if xerr is None else np.where(hollow, np.nan, xerr[0]),
                        "xhi": np.nan if xerr is None else np.where(hollow, np.nan, xerr[1]),
                        "ylo": np.nan if yerr is None else yerr[0],
                        "yhi": np.nan if yerr is None else yerr[1],
                    }
                )
            )
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _panel_title(key: str, data: Prepared) -> str:
    if key == "cost_ratio":
        return f"billed cost / FC ({data.meta.get('cost_method', 'estimated')})"
    return next(label for k, label, _, _ in PANELS if k == key)


DODGE = 0.025  # how far apart (in tokens / FC) points with equal values are drawn
DODGED = "equal values drawn side by side"


def dodged(x: pd.Series, y: pd.Series, step: float = DODGE) -> pd.Series:
    """x offsets that set points with equal (x, y) side by side, centred on their value (0 for a
    point that coincides with none); equal to 3 decimals."""
    offsets = pd.Series(0.0, index=x.index)
    keys = pd.DataFrame({"x": x.round(3), "y": y.round(3)})
    for _, group in keys[np.isfinite(x) & np.isfinite(y)].groupby(["x", "y"]):
        k = len(group)
        if k > 1:
            offsets[group.index] = (np.arange(k) - (k - 1) / 2) * step
    return offsets


def _points(data: pd.DataFrame, **_) -> None:
    """One facet's policies (FacetGrid.map_dataframe): a point per policy with its task-bootstrap
    interval from the metrics; hollow where tokens / FC is undefined (drawn at x = 1); points with
    equal values side by side (``dodged``), so that every policy stays visible."""
    ax = plt.gca()
    offsets = dodged(data["x"], data["y"])
    for r, dx in zip(data.itertuples(), offsets):
        if not np.isfinite(r.y):
            continue
        xerr = None if not np.isfinite(r.xlo) else [[r.xlo], [r.xhi]]  # drawn about the shifted point
        yerr = None if not np.isfinite(r.ylo) else [[r.ylo], [r.yhi]]
        ax_.policy_point(
            ax, r.x + dx, r.y, r.policy, xerr=xerr, yerr=yerr, **({"markerfacecolor": "none"} if r.hollow else {})
        )
    if (offsets != 0).any():
        ax.set_gid("dodged")


def plot(data: Prepared, name: str = "fig2"):
    title = f"{style.figure_name(name)}: success and resources against FC"
    combos = ax_.combos_with_data(data, data.meta.get("combos") or [])
    if not combos:
        return notes.note_figure(title, data.notes)
    long = _long(data, combos)
    specs = style.order_policies(data.table["policy"])
    # seaborn lays out the pair × measure panels; the drawing itself is per point (asymmetric
    # intervals from ctxpolicy.metrics, never seaborn's own estimates)
    grid = style.seaborn().FacetGrid(
        long,
        row="pair",
        col="panel",
        row_order=list(dict.fromkeys(long["pair"])),
        col_order=[_panel_title(k, data) for k, *_ in PANELS],
        sharex=True,
        sharey="col",
        height=1.7 if len(combos) > 1 else 2.0,
        aspect=1.1,
        despine=False,
    )
    grid.map_dataframe(_points)
    grid.set_titles(template="")
    grid.set_axis_labels("tokens / FC", "")
    for (r, c), ax in np.ndenumerate(grid.axes):
        if r == 0:
            ax.set_title(grid.col_names[c])
        if c == 0:  # the pair and its threshold, once per row
            ax.set_ylabel(grid.row_names[r])
        key, _, ref, _ = PANELS[c]
        _guides(ax, key, ref)
        rows = long[(long["pair"] == grid.row_names[r]) & (long["key"] == key)]
        if rows["hollow"].any():
            message = "hollow: tokens / FC undefined, drawn at x = 1"
            ax.text(0.02, 0.97, message, transform=ax.transAxes, fontsize=5.5, va="top", color=notes.NOTE_COLOR)
            notes.record(ax.figure, message + ".")
        benchmark, model = combos[r]
        notes.note_if_empty(ax, notes.about(data.notes, model, benchmark))
    fig = grid.figure
    fig.suptitle(
        f"{style.figure_name(name)}: success and resources against FC\n"
        f"({style.threshold_label(data.meta.get('setting'))} threshold; depth-tunable policies at D = 0.5)",
        x=0.01,
        ha="left",
    )
    grid.tight_layout()
    together = any(ax.get_gid() == "dodged" for ax in grid.axes.flat)
    if together:
        notes.record(fig, f"Policies with {DODGED} (the data are unchanged).")
    ax_.facet_legend(
        grid, ax_.policy_handles(specs), title="policy\n(equal values drawn\nside by side)" if together else None
    )  # after the layout: it widens the figure for itself
    gaps = [n for n in data.notes if "resource ratios" in n]
    return notes.finish(fig, data.said(), empty_panel=" ".join(gaps) or None)


def _guides(ax, key: str, ref: float) -> None:
    """Reference lines: no change (horizontal), FC's tokens (vertical, dotted), proportional
    savings (y = x) in the resource panels, and grey where billed cost exceeds FC's."""
    ax.axhline(ref, color="#666666", linewidth=0.6, zorder=1)
    ax.axvline(1.0, color="#666666", linewidth=0.6, linestyle=":", zorder=1)
    if key != "resolve_delta":
        lo, hi = ax.get_xlim()
        ax.plot([lo, hi], [lo, hi], linestyle=":", color="#888888", linewidth=0.8, zorder=1, gid=notes.REFERENCE)
        ax.set_xlim(lo, hi)
    if key == "cost_ratio":
        ylo, yhi = ax.get_ylim()
        yhi = max(yhi, 1.05)
        ax.axhspan(1.0, yhi, color=style.REGION_SHADE, zorder=0, linewidth=0, gid=notes.REFERENCE)
        ax.set_ylim(ylo, yhi)
