"""Figure 3 and Figures 9–15: the threshold and depth sweep.

The sweep's policies are the tunable primitives at every depth (including the full
comparison's depth at its setting, whose main-cohort runs cover the sweep subset) and
the depth-invariant policies, each at every threshold setting, on the sweep cohort's tasks.
"""

from __future__ import annotations

from collections.abc import Mapping

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from ctxpolicy.figures import axes as ax_
from ctxpolicy.figures import comparisons, inputs, notes, style
from ctxpolicy.figures.prepared import Prepared
from ctxpolicy.metrics.calibrate import sweep_warnings
from ctxpolicy.metrics.depth_wins import TIE_RULE, depth_wins
from ctxpolicy.metrics.outcomes import time_limited
from ctxpolicy.metrics.sweep import all_attempts_summary, firings_per_attempt
from ctxpolicy.study import Pair, Study


def sweep_policies(study: Study) -> list[str]:
    """The policies of the sweep's design (``Study.design``): its own cells' and those the grid
    gives to the full comparison (the primary D = 0.5 cells, whose main cohort covers the sweep
    subset)."""
    return style.order_policies({d.policy for d in study.design("sweeps")} - {style.FC})


def summary_cells(study: Study, pair: Pair, policies: list[str], settings: list[str]) -> dict:
    """Figure 3's table rows and the cell behind each: ``{"fc": FC cell slug, "rows": [(setting,
    policy, cell slug), ...]}`` in setting then policy order, from the sweep's design (a policy
    without a threshold is the same cell at every setting; the full comparison's primary cell
    stands in the sweep)."""
    by_key = {(d.setting, d.policy): d.cell for d in study.design("sweeps", pair)}
    unset = {d.policy: d.cell for d in study.design("sweeps", pair) if d.setting is None}
    rows = []
    for setting in settings:
        for policy in policies:
            cell = by_key.get((setting, policy)) or unset.get(policy)
            if cell is not None:
                rows.append((setting, policy, cell.slug))
    fc = study.reference_cell(pair)
    return {"fc": fc.slug if fc else None, "rows": rows}


def _sweep_combo(study: Study, pairs: list[tuple[str, str]] | None) -> tuple[tuple[str, str] | None, list[str]]:
    """The one (benchmark, model) a sweep figure draws: the first of ``pairs``, else the sweep
    block's first, with a note when there is none."""
    if pairs is not None:
        chosen, said = comparisons.pair_combos(study, "sweeps", pairs[:1])
        return (chosen[0] if chosen else None), said
    combos = inputs.combos(study, "sweeps")
    if combos:
        return combos[0], []
    return None, ["the config's sweep covers no model/benchmark pair."]


def compute(
    runs: pd.DataFrame,
    study: Study,
    *,
    n_boot: int,
    seed: int,
    pairs: list[tuple[str, str]] | None = None,
    calls: pd.DataFrame | None = None,
    summaries: bool = True,
) -> Prepared:
    """``compare_to_baseline`` rows (``metrics.compare.COMPARE_KEYS``, docs/metrics.md) of one
    (benchmark, model) of the sweep on the sweep tasks: the first of ``pairs`` ((model, benchmark),
    ``inputs.parse_pairs``; ``[]``: none, the figure says so), else the sweep block's first pair.

    Resolve rates count every run; the resource ratios leave time-limited runs out
    (``ctxpolicy.metrics.compare.resource_eligible``), and so does the compression frequency
    (``extra["frequency"]``: firings per attempt, from ``calls``). ``extra["summary"]`` is
    Figure 3's right-hand table, over all attempts (``all_attempts_summary``)."""
    if pairs is not None and not pairs:
        return Prepared(pd.DataFrame(), [], {"no_pair": True})
    combo, said = _sweep_combo(study, pairs)
    if combo is None:
        return Prepared(pd.DataFrame(), said)
    policies = sweep_policies(study)
    settings = sorted(study.section("sweeps")["settings"], key=style.setting_sort_key)
    cohort = study.section("sweeps")["cohort"]
    compared = comparisons.compare_block(
        runs, study, "sweeps", n_boot=n_boot, seed=seed, combos=[combo], cohort=cohort, policies=policies
    )
    pair = Pair(combo[1], combo[0])
    own = comparisons.design_runs(runs, study, "sweeps", pair, cohort)  # by cell id, the shared cells included
    frequency, freq_notes, summary = pd.DataFrame(), [], pd.DataFrame()
    if summaries:  # Figure 3's frequency curves and table (``summaries=False``: the ablation figures)
        frequency, freq_notes = firings_per_attempt(own[~time_limited(own).to_numpy()], calls)
        summary = all_attempts_summary(
            own, summary_cells(study, pair, policies, settings), study.cost_method, attempts=study.attempts
        )
    thresholds = ax_.threshold_table(own)
    return Prepared(
        _with_depth(compared.table),
        said + compared.notes + freq_notes + coincide_notes(thresholds, combo),
        {
            "combo": combo,
            "settings": settings,
            "policies": policies,
            "cost_method": study.cost_method,
            "thresholds": thresholds,
        },
        {"frequency": frequency, "summary": summary},
        n=compared.n,
    )


def coincide_notes(thresholds: Mapping[tuple[str, str, str], float], combo: tuple[str, str]) -> list[str]:
    """The calibration's sweep warning (``metrics.calibrate.sweep_warnings``) for the settings the
    pair's runs ran at: a sweep whose thresholds coincide says so in every sweep figure's notes."""
    benchmark, model = combo
    ran = {s: int(v) for (b, m, s), v in thresholds.items() if (b, m) == (benchmark, model)}
    return [f"{model} on {benchmark}: {w}." for w in sweep_warnings(ran) if "cannot separate" in w]


def _with_depth(table: pd.DataFrame) -> pd.DataFrame:
    if table.empty:
        return table
    return table.assign(
        policy=table["policy"].astype(str),
        setting=table["setting"].astype(str),
        depth=[style.depth_of(p) for p in table["policy"].astype(str)],
    )


def _setting_labels(data: Prepared) -> dict[str, str]:
    """``Tight (10K)`` for each setting, from the thresholds the pair's runs ran at."""
    benchmark, model = data.meta["combo"]
    return {
        s: ax_.pair_threshold_label(data.meta.get("thresholds") or {}, benchmark, model, s)
        for s in data.meta["settings"]
    }


def _depths(policies: list[str]) -> list[float]:
    return sorted({style.depth_of(p) for p in policies if style.depth_of(p) is not None})


def sweep_handles(policies: list[str], *, depth_by: str = "linestyle", fc_reference: bool = True) -> list[Line2D]:
    """The sweep figures' legend: one entry per primitive (its colour and marker; a depth-invariant
    policy as a dashed level without a marker, labelled without a depth), then how depth is drawn
    (grey, by line style or marker fill) and FC's level."""
    tunable = style.order_policies({style.primitive_of(p) for p in policies if style.depth_of(p) is not None})
    invariant = [p for p in style.order_policies(policies) if style.depth_of(p) is None]
    handles = [
        Line2D(
            [], [], color=style.policy_color(p), marker=style.policy_marker(p), markersize=4, label=style.short_label(p)
        )
        for p in tunable
    ]
    handles += [
        Line2D(
            [],
            [],
            color=style.policy_color(p),
            linestyle=INVARIANT_STYLE,
            linewidth=1.2,
            label=f"{style.short_label(p)} (no depth)",
        )
        for p in invariant
    ]
    depths = _depths(policies) if depth_by != "position" else []  # "position": depth is the x axis
    for d in depths:
        if depth_by == "linestyle":  # Figure 3's lines: a depth's line style and its marker's fill
            fill = style.depth_fillstyle(d, depths)
            handles.append(
                Line2D(
                    [],
                    [],
                    color="#666666",
                    linestyle=style.depth_linestyle(d, depths),
                    marker="o",
                    markersize=3.5,
                    fillstyle=fill,
                    label=f"{style.depth_label(d)} ({FILL_WORDS.get(fill, fill)})",
                )
            )
        else:
            handles.append(
                Line2D(
                    [],
                    [],
                    color="#666666",
                    marker="o",
                    linestyle="none",
                    markersize=4,
                    fillstyle=style.depth_fillstyle(d, depths),
                    label=style.depth_label(d),
                )
            )
    if fc_reference:
        handles.append(Line2D([], [], color="#666666", linewidth=0.6, label="FC"))
    return handles


FILL_WORDS = {"none": "open", "full": "filled", "bottom": "half", "left": "half", "right": "half"}
INVARIANT_STYLE = (0, (4, 2))  # a depth-invariant policy's level; never a depth's line style


def _invariant_levels(ax, rows: pd.DataFrame, key: str, xs: dict, half: float = 0.32, scale: float = 1.0) -> None:
    """A depth-invariant policy: a level per threshold (a dashed segment over that setting's x)."""
    for r in rows.itertuples():
        y = float(ax_.value(rows.loc[[r.Index]], key, scale).iloc[0])
        if np.isfinite(y) and r.setting in xs:
            x = xs[r.setting]
            ax.plot(
                [x - half, x + half],
                [y, y],
                color=style.policy_color(r.policy),
                linestyle=INVARIANT_STYLE,
                linewidth=1.2,
                zorder=2,
            )


def _line(ax, table: pd.DataFrame, policy: str, settings: list[str], key: str, depths) -> None:
    rows = table[table["policy"] == policy].drop_duplicates("setting").set_index("setting").reindex(settings)
    values = ax_.value(rows, key)
    if values.isna().all():
        return
    depth = style.depth_of(policy)
    ax.errorbar(
        np.arange(len(settings)),
        values,
        yerr=ax_.interval(rows, key),
        color=style.policy_color(policy),
        marker=style.policy_marker(policy),
        markersize=3.5,
        fillstyle=style.depth_fillstyle(depth, depths),
        linestyle=style.depth_linestyle(depth, depths),
        elinewidth=0.6,
        linewidth=0.9,
        label=style.policy_label(policy),
    )


def plot_fig3(data: Prepared, name: str = "fig3"):
    title = f"{style.figure_name(name)}: threshold and depth sweep"
    summary = data.extra.get("summary", pd.DataFrame())
    if data.meta.get("no_pair"):
        return ax_.no_pair_figure(title, name)
    if data.empty and summary.empty:
        return notes.note_figure(title, data.notes)
    settings, policies = data.meta["settings"], data.meta["policies"]
    labels = _setting_labels(data)
    freq = data.extra.get("frequency", pd.DataFrame())
    depths = _depths(policies)
    xs = {s: i for i, s in enumerate(settings)}
    # plt.subplots, not a FacetGrid: three measures against the threshold beside a table
    n_rows = summary["policy"].nunique() if not summary.empty else 0
    # the table's rows keep a readable height: a long table makes the figure taller
    fig = plt.figure(figsize=(style.FULL_WIDTH, max(4.4, 1.9 + 0.15 * n_rows)), layout="constrained")
    left, right = fig.subfigures(1, 2, width_ratios=[1.0, 1.3])
    axs = left.subplots(3, 1, sharex=True)
    panels = (
        (freq, "firings_per_attempt", "compressions\nper attempt"),
        (data.table, "cost_ratio", f"billed cost / FC\n({data.meta.get('cost_method')})"),
        (data.table, "latency_ratio", "latency / FC"),
    )
    for ax, (table, key, label) in zip(axs, panels):
        if not table.empty:
            for policy in policies:
                if style.depth_of(policy) is None:
                    rows = table[table["policy"].astype(str) == policy].drop_duplicates("setting")
                    _invariant_levels(ax, rows, key, xs)
                else:
                    _line(ax, table, policy, settings, key, depths)
        ax.set_ylabel(label)
        if key != "firings_per_attempt":
            ax.axhline(1.0, color="#666666", linewidth=0.6)
    axs[-1].set_xticks(range(len(settings)), [labels[s].replace(" (", "\n(") for s in settings])
    axs[-1].set_xlim(-0.5, len(settings) - 0.5)
    axs[-1].set_xlabel("threshold (time-limited runs excluded)")
    left.legend(
        handles=sweep_handles(policies),
        loc="outside lower center",
        ncol=3,  # four columns run past the left panels into the depth-win counts
        frameon=False,
        handlelength=1.6,
        columnspacing=0.8,
        handletextpad=0.3,
        fontsize=6,
    )
    benchmark, model = data.meta["combo"]
    fig.suptitle(f"{title}: {model} · {benchmark} · sweep subset", x=0.01, ha="left")
    _summary_table(right.subplots(), summary, settings, labels)
    if not summary.empty:  # the depth-win counts under the table, in the space the layout keeps for them
        right.supxlabel("\n".join(depth_wins(summary).lines()), x=0.02, ha="left", fontsize=5.5)
    gaps = [n for n in data.notes if "resource ratios" in n]
    return notes.finish(fig, data.said(), empty_panel=" ".join(gaps) or None)


YELLOW, GREEN = "#F6E27F", "#A8DDB5"
MAX_ROW_HEIGHT = 0.05  # of the table's axes
SUMMARY_MEASURES = (
    ("resolve_rate", "res.", "{:.0%}"),
    ("cost_ratio_all", "cost", "{:.2f}"),
    ("latency_s", "lat. s", "{:.0f}"),
)


def _row_label(policy: str) -> str:
    depth = style.depth_of(policy)
    return style.short_label(policy) + (f" {depth:g}" if depth is not None else "")


def _summary_table(ax, rows: pd.DataFrame, settings: list[str], labels: dict[str, str]) -> None:
    """Resolve rate, cost / FC and latency (s) over all attempts, a row per policy (primitive and
    depth) and a column group per threshold; yellow: best resolve, green: best cost, ○: best
    latency, across depths within each primitive and setting."""
    ax.axis("off")
    if rows.empty:
        notes.note_on_axes(ax, "no sweep runs to tabulate.")
        return
    rows = rows.assign(policy=rows["policy"].astype(str), setting=rows["setting"].astype(str))
    policies = style.order_policies(rows["policy"])
    indexed = rows.set_index(["policy", "setting"])
    text, marks = [], []
    for policy in policies:
        line, mark = [_row_label(policy)], [None]
        for setting in settings:
            r = indexed.loc[(policy, setting)] if (policy, setting) in indexed.index else None
            for key, _, pattern in SUMMARY_MEASURES:
                value = None if r is None else r[key]
                cell = "–" if value is None or pd.isna(value) else pattern.format(value)
                if key == "latency_s" and r is not None and bool(r["best_latency"]):
                    cell += "○"
                line.append(cell)
                best = r is not None and (
                    (key == "resolve_rate" and bool(r["best_resolve"]))
                    or (key == "cost_ratio_all" and bool(r["best_cost"]))
                )
                mark.append((YELLOW if key == "resolve_rate" else GREEN) if best else None)
        text.append(line)
        marks.append(mark)
    header = ["policy", *[f"{m}\n{labels[s].split(' ')[0]}" for s in settings for _, m, _ in SUMMARY_MEASURES]]
    t = ax.table(cellText=text, colLabels=header, loc="upper right", cellLoc="center", edges="horizontal")
    t.auto_set_font_size(False)
    # every row inside the axes, the two-line header too; a short table keeps rows of a readable height
    row_height = min(0.98 / (len(text) + 1.9), MAX_ROW_HEIGHT)
    for (i, j), cell in t.get_celld().items():
        cell.set_height(row_height if i else 1.9 * row_height)
        if i and marks[i - 1][j]:
            # a cell with horizontal edges only is an open path, which matplotlib does not fill:
            # a marked cell is closed, its edges in its own colour
            cell.visible_edges = "closed"
            cell.set_facecolor(marks[i - 1][j])
            cell.set_edgecolor(marks[i - 1][j])
    _fit_width(ax, t, len(header))
    ax.set_title(
        "all attempts, per threshold: resolve rate, billed cost / FC, latency (s);\n"
        "best across depths per primitive: yellow resolve, green cost, ○ latency\n"
        f"(only where a primitive has several depths at that threshold; {TIE_RULE})",
        loc="left",
        fontsize=6.5,
    )


def _fit_width(ax, table, columns: int, sizes: tuple[float, ...] = (5.5, 5.0, 4.5, 4.0)) -> None:
    """The largest font (of ``sizes``) at which the table, columns sized to their text, is no
    wider than its axes (a wider table would run into the panels beside it)."""
    renderer = ax.figure.canvas.get_renderer()
    for size in sizes:
        table.set_fontsize(size)
        table.auto_set_column_width(list(range(columns)))
        if table.get_window_extent(renderer).width <= 0.96 * ax.get_window_extent(renderer).width:
            return


ABLATION_ROWS = (
    ("resolve_delta", "Δ resolve (pp)", 0.0, 100.0),
    ("tokens_ratio", "tokens / FC", 1.0, 1.0),
    ("latency_ratio", "latency / FC", 1.0, 1.0),
    ("cost_ratio", "billed cost / FC", 1.0, 1.0),
)


def _ablation_long(data: Prepared, labels: dict[str, str]) -> pd.DataFrame:
    frames = []
    table = data.table
    for key, label, _, scale in ABLATION_ROWS:
        y = ax_.value(table, key, scale)
        err = ax_.interval(table, key, scale)
        frames.append(
            pd.DataFrame(
                {
                    "measure": label,
                    "key": key,
                    "setting": table["setting"].map(labels),
                    "policy": table["policy"],
                    "depth": table["depth"],
                    "y": y.to_numpy(),
                    "ylo": np.nan if err is None else err[0],
                    "yhi": np.nan if err is None else err[1],
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


def _ablation_facet(data: pd.DataFrame, *, depths: list[float], **_) -> None:
    """One threshold × measure (FacetGrid.map_dataframe): each depth-tunable primitive as a line
    across depths (intervals from ctxpolicy.metrics), each depth-invariant policy as a dashed level
    across the depth axis, with no marker: it was not run at a depth."""
    ax = plt.gca()
    lo, hi = (min(depths), max(depths)) if depths else (0.0, 1.0)
    pad = 0.08 * (hi - lo or 1.0)
    primitives = style.order_policies({style.primitive_of(p) for p in data["policy"] if style.depth_of(p) is not None})
    for k, primitive in enumerate(primitives):
        line = data[data["policy"].map(style.primitive_of) == primitive].dropna(subset=["depth"]).sort_values("depth")
        line = line[np.isfinite(line["y"])]
        if line.empty:
            continue
        dodge = (k - (len(primitives) - 1) / 2) * 0.012 * (hi - lo or 1.0)  # side by side: intervals stay legible
        yerr = None if line["ylo"].isna().all() else np.vstack([line["ylo"], line["yhi"]])
        ax.errorbar(
            line["depth"] + dodge,
            line["y"],
            yerr=yerr,
            color=style.policy_color(primitive),
            marker=style.policy_marker(primitive),
            markersize=3.5,
            linewidth=0.9,
            elinewidth=0.6,
            markeredgecolor="white",
            markeredgewidth=0.3,
            zorder=3,
        )
    for r in data[data["policy"].map(style.depth_of).isna()].itertuples():
        if np.isfinite(r.y):
            ax.plot(
                [lo - pad, hi + pad],
                [r.y, r.y],
                color=style.policy_color(r.policy),
                linestyle=INVARIANT_STYLE,
                linewidth=1.0,
                zorder=2,
            )


def plot_ablation(data: Prepared, name: str):
    title = f"{style.figure_name(name)}: depth and threshold ablation"
    if data.meta.get("no_pair"):
        return ax_.no_pair_figure(title, name)
    if data.empty:
        return notes.note_figure(title, data.notes)
    settings, policies = data.meta["settings"], data.meta["policies"]
    labels = _setting_labels(data)
    depths = _depths(policies)
    long = _ablation_long(data, labels)
    grid = style.seaborn().FacetGrid(
        long,
        row="measure",
        col="setting",
        row_order=[label for _, label, _, _ in ABLATION_ROWS],
        col_order=[labels[s] for s in settings],
        sharex=True,
        sharey="row",
        height=1.15,
        aspect=1.45,
        despine=False,
    )
    grid.map_dataframe(_ablation_facet, depths=depths)
    grid.set_titles(template="")
    for (r, c), ax in np.ndenumerate(grid.axes):
        key, label, ref, _ = ABLATION_ROWS[r]
        ax.axhline(ref, color="#666666", linewidth=0.6, zorder=1)
        if r == 0:
            ax.set_title(f"({'abcdefghij'[c]}) {grid.col_names[c]}", loc="left")
        ax.set_ylabel(
            (f"{label}\n({data.meta.get('cost_method')})" if key == "cost_ratio" else label) if c == 0 else ""
        )
        ax.set_xlabel("depth D" if r == len(ABLATION_ROWS) - 1 else "")
        if depths:
            ax.set_xticks(depths, [f"{d:g}" for d in depths])
    benchmark, model = data.meta["combo"]
    fig = grid.figure
    fig.suptitle(
        f"{title}: {model} · {benchmark} · sweep subset\n(one column per trigger threshold, in tokens; x: depth D)",
        x=0.01,
        ha="left",
    )
    grid.tight_layout()
    ax_.facet_legend(
        grid,
        sweep_handles(policies, depth_by="position", fc_reference=False)
        + [Line2D([], [], color="#666666", linewidth=0.6, label="no change vs FC")],
    )
    gaps = [n for n in data.notes if "resource ratios" in n]
    return notes.finish(fig, data.said(), empty_panel=" ".join(gaps) or None)


def compute_ablation(
    runs: pd.DataFrame,
    study: Study,
    *,
    n_boot: int,
    seed: int,
    pairs: list[tuple[str, str]] | None = None,
) -> Prepared:
    """Figures 9–15: ``compute`` for one pair, without Figure 3's frequency curves and table."""
    data = compute(runs, study, n_boot=n_boot, seed=seed, pairs=pairs, summaries=False)
    data.extra = {}
    return data
