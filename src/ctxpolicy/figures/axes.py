"""The figures' kit: the drawing scaffolds the figure modules share.

Interval points and bars (``value``, ``interval``, ``policy_point``, ``interval_points``), legends,
reference lines, model × benchmark panels (``pair_facets``, sized for one row per policy by
``policy_facets``), the policies drawn (``policies_drawn``) and a pair's rows in their order
(``pair_rows``), a panel's policy rows (``policy_rows``), bars side by side (``side_by_side``),
counts and factors printed right of a panel (``right_of_rows``), and the titles' threshold words
(``setting_words``).
"""

from __future__ import annotations

from collections.abc import Iterable

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from ctxpolicy.figures import style


def value(table: pd.DataFrame, key: str, scale: float = 1.0) -> pd.Series:
    """A key's point estimate (``{key}_est``, or ``key`` itself), times ``scale``, as floats."""
    column = f"{key}_est" if f"{key}_est" in table else key
    return table[column].astype(float) * scale


def interval(table: pd.DataFrame, key: str, scale: float = 1.0) -> np.ndarray | None:
    """2×n asymmetric error bars from the key's estimate, ``{key}_lo`` and ``{key}_hi`` (NaN where a
    bound is unknown: no whisker); None when the table has no interval for the key."""
    if f"{key}_lo" not in table or f"{key}_hi" not in table:
        return None
    mid = value(table, key, scale).to_numpy()
    lo = table[f"{key}_lo"].astype(float).to_numpy() * scale
    hi = table[f"{key}_hi"].astype(float).to_numpy() * scale
    with np.errstate(invalid="ignore"):  # an unknown bound stays NaN: no whisker is drawn for it
        return np.vstack([mid - lo, hi - mid]).clip(min=0)


def policy_point(ax, x: float, y: float, spec: str, *, xerr=None, yerr=None, **kw) -> None:
    """One policy's point; ``markerfacecolor="none"`` draws it hollow (in the policy's colour)."""
    color = style.policy_color(spec)
    look = {"elinewidth": 0.8, "markersize": 5, "markeredgecolor": "white", "markeredgewidth": 0.4, "zorder": 3}
    if kw.get("markerfacecolor") == "none":
        look.update(markeredgecolor=color, markeredgewidth=0.9)
    ax.errorbar(
        [x], [y], xerr=xerr, yerr=yerr, fmt=style.policy_marker(spec), color=color, ecolor=color, **{**look, **kw}
    )


def policy_handles(specs: Iterable[str], settings: dict[str, str] | None = None) -> list[Line2D]:
    return [
        Line2D(
            [],
            [],
            linestyle="none",
            marker=style.policy_marker(s),
            color=style.policy_color(s),
            markersize=5,
            label=style.policy_label(s, (settings or {}).get(s)),
        )
        for s in specs
    ]


def legend_top(fig, handles, ncol: int | None = None, title: str | None = None) -> None:
    """One legend for the whole figure, above the panels (needs a constrained layout). ``title``:
    the figure's title, drawn as the legend's (left-aligned) title so that the constrained layout
    stacks the two (a ``suptitle`` and an outside legend would share one band and collide)."""
    if not handles:
        if title:
            fig.suptitle(title, x=0.0, ha="left")
        return
    legend = fig.legend(
        handles=handles,
        loc="outside upper center",
        ncol=ncol or min(len(handles), 6),
        frameon=False,
        handletextpad=0.3,
        columnspacing=1.0,
        title=title,
        alignment="left" if title else "center",
    )
    if title:
        legend.get_title().set_fontsize(mpl.rcParams["figure.titlesize"])


def combos_with_data(data, combos) -> list[tuple[str, str]]:
    """The (benchmark, model) pairs that have rows; the others are already in the notes."""
    if data.empty:
        return []
    present = set(zip(data.table["benchmark"].astype(str), data.table["model"].astype(str)))
    return [c for c in combos if c in present]


def grid(nrows: int, ncols: int, *, width: float = style.FULL_WIDTH, row_height: float = 1.9, **kw):
    fig, axes = plt.subplots(
        nrows, ncols, figsize=(width, row_height * nrows + 0.3), squeeze=False, layout="constrained", **kw
    )
    return fig, axes


def combo_title(benchmark: str, model: str) -> str:
    return f"{model} · {benchmark}"


# ---------------------------------------------------------------- model/benchmark pairs


def threshold_tokens(runs_like: pd.DataFrame, setting: str) -> float | None:
    """The threshold (tokens) a table's rows ran at for one setting: their median, None if unknown."""
    if "threshold_tokens" not in runs_like or "setting" not in runs_like:
        return None
    values = pd.to_numeric(
        runs_like.loc[runs_like["setting"].astype("object") == setting, "threshold_tokens"], errors="coerce"
    ).dropna()
    return float(values.median()) if len(values) else None


def facet_legend(grid, handles: list, *, title: str | None = None) -> None:
    """One legend right of a laid-out figure (a seaborn FacetGrid or a figure), from explicit
    handles, one per colour or line style the figure draws; the saved area (``bbox_inches=
    "tight"``) takes it in, so the panels keep their size."""
    fig = getattr(grid, "figure", grid)
    if handles:
        fits = max(4, int(fig.get_figheight() * 72 / 12) - 3)  # entries a column holds beside the panels
        fig.legend(
            handles=handles,
            loc="center left",
            bbox_to_anchor=(1.0, 0.45),
            frameon=False,
            title=title,
            handletextpad=0.3,
            borderaxespad=0.2,
            ncol=-(-len(handles) // fits),
        )


def no_pair_figure(title: str, name: str):
    """A numbered figure the grid has no model/benchmark pair for: one line saying so."""
    from ctxpolicy.figures import notes, style

    return notes.note_figure(
        title,
        f"{style.figure_name(name)} has no model/benchmark pair in this study's grid: no runs to draw.",
        height=0.9,
    )


def threshold_table(runs: pd.DataFrame) -> dict[tuple[str, str, str], float]:
    """(benchmark, model, setting) → the threshold in tokens the runs ran at (their median)."""
    if runs.empty or "threshold_tokens" not in runs:
        return {}
    known = runs[pd.to_numeric(runs["threshold_tokens"], errors="coerce").notna() & runs["setting"].notna()]
    if known.empty:
        return {}
    medians = (
        known.assign(
            threshold_tokens=pd.to_numeric(known["threshold_tokens"]),
            benchmark=known["benchmark"].astype(str),
            model=known["model"].astype(str),
            setting=known["setting"].astype(str),
        )
        .groupby(["benchmark", "model", "setting"])["threshold_tokens"]
        .median()
    )
    return {key: float(v) for key, v in medians.items()}


def pair_threshold_label(thresholds: dict, benchmark: str, model: str, setting: str | None) -> str:
    """``Primary (15K)`` for one pair's setting (the name alone when the runs do not say)."""
    from ctxpolicy.figures import style

    return style.threshold_label(setting, thresholds.get((benchmark, model, str(setting))))


def pair_facets(
    combos,
    *,
    width: float = style.FULL_WIDTH,
    panel_height: float = 2.0,
    sharex: bool | str = False,
    sharey: bool | str = False,
):
    """Model × benchmark panels laid out by seaborn (``FacetGrid``: one row per benchmark, one
    column per model, in the order of ``combos``, a list of (benchmark, model) pairs); the model is
    the top row's titles, the benchmark the left column's y label. Axes are not shared by default: a
    panel that ends up with a note (``notes.note_on_axes``) clears its ticks, which would clear its
    siblings' too; ``hide_inner_labels`` prints tick labels once instead. Returns (figure, {(benchmark, model): axes}); a pair of the
    grid that ``combos`` lacks gets no axes (it is removed). The figure uses the constrained layout,
    so ``legend_top`` and ``fig.supxlabel`` keep clear of the panels."""
    benchmarks = list(dict.fromkeys(b for b, _ in combos))
    models = list(dict.fromkeys(m for _, m in combos))
    frame = pd.DataFrame(list(combos), columns=["benchmark", "model"])
    height = panel_height
    aspect = (width / max(len(models), 1)) / height
    grid = style.facet_grid(
        frame,
        row="benchmark",
        col="model",
        row_order=benchmarks,
        col_order=models,
        sharex=sharex,
        sharey=sharey,
        height=height,
        aspect=aspect,
        despine=False,
    )
    # The benchmark is the left column's y label, not a margin title on the right, where the
    # panels' own annotations (n per bar, factors) go.
    grid.set_titles(template="")
    for (benchmark, model), ax in grid.axes_dict.items():
        if benchmark == benchmarks[0]:
            ax.set_title(model)
        if model == models[0]:
            ax.set_ylabel(benchmark, fontweight="bold")
    fig = grid.figure
    fig.set_layout_engine("constrained")
    present = set(combos)
    panels = {}
    for (benchmark, model), ax in grid.axes_dict.items():
        if (benchmark, model) in present:
            panels[(benchmark, model)] = ax
        else:
            ax.set_visible(False)
    return fig, panels


def hide_inner_labels(panels: dict, *, left: bool = True, bottom: bool = False) -> None:
    """Print the y tick labels once per row (``left``: the leftmost panel of each benchmark) and,
    with ``bottom``, the x tick labels once per column (the lowest panel of each model); the
    panels must share their ticks' positions."""
    rows: dict[str, list] = {}
    columns: dict[str, list] = {}
    for (benchmark, model), ax in panels.items():
        rows.setdefault(benchmark, []).append(ax)
        columns.setdefault(model, []).append(ax)
    if left:
        for axes in rows.values():
            for ax in axes[1:]:
                ax.tick_params(labelleft=False)
    if bottom:
        for axes in columns.values():
            for ax in axes[:-1]:
                ax.tick_params(labelbottom=False)


def figure_title(name: str, text: str) -> str:
    """``Figure 20: text`` for a numbered stem (``style.figure_name``), the text alone for others
    (``cost_sensitivity``, ``retention``)."""
    label = style.figure_name(name)
    return f"{label}: {text}" if label != name else text[:1].upper() + text[1:]


# ---------------------------------------------------------------- one row per policy


def policies_drawn(data) -> list[str]:
    """The policies a figure's table has rows for, in the study's policy order."""
    return style.order_policies(data.table["policy"].astype(str).unique())


def setting_words(meta: dict) -> str:
    """``primary`` / ``loose (20K)``: the threshold setting a figure's title names, lower case."""
    return style.threshold_label(meta.get("setting", "primary")).lower()


def pair_rows(
    table: pd.DataFrame, benchmark: str, model: str, specs: list[str], *, first: bool = False
) -> pd.DataFrame:
    """One pair's rows of a figure's table indexed by policy in ``specs`` order (a policy without a
    row: NaN); ``first``: only the first row of a policy that has several."""
    rows = table[(table["benchmark"] == benchmark) & (table["model"] == model)]
    if first:
        rows = rows.drop_duplicates("policy")
    return rows.set_index(rows["policy"].astype(str)).reindex(specs)


def policy_facets(
    combos,
    specs: list[str],
    *,
    per_policy: float = 0.2,
    base: float = 0.6,
    least: float = 1.3,
    per_model: float = 2.4,
    margin: float = 0.9,
):
    """``pair_facets`` for panels with one row per policy: each panel ``per_policy`` inches a policy
    plus ``base`` (at least ``least``) high, the figure ``per_model`` inches a model plus ``margin``
    wide (at most the page)."""
    models = len({m for _, m in combos})
    return pair_facets(
        combos,
        panel_height=max(least, per_policy * len(specs) + base),
        width=min(style.FULL_WIDTH, per_model * models + margin),
    )


def policy_rows(ax, y, specs: list[str], *, labels: bool = True) -> None:
    """A panel with one row per policy at heights ``y``: its limits, the rows' labels (``labels``)
    and no grid line across the rows."""
    ax.set_ylim(-0.6, len(specs) - 0.4)
    if labels:
        ax.set_yticks(y, style.row_labels(specs))
    ax.grid(axis="y", visible=False)


def side_by_side(y: np.ndarray, n: int) -> tuple[list[np.ndarray], float]:
    """The heights of ``n`` bars side by side in each row at ``y`` (the first on top), and their
    thickness."""
    height = 0.8 / max(n, 1)
    return [y + ((n - 1) / 2 - k) * height for k in range(n)], height


def counts(values) -> list[str | None]:
    """Counts as printed beside a row: whole numbers, None where unknown."""
    return [f"{n:.0f}" if pd.notna(n) else None for n in values]


def right_of_rows(ax, y, texts, *, fontsize: float = 5.5) -> None:
    """A short text right of the panel at each row height (n tasks, a factor); None: nothing there."""
    for yi, text in zip(y, texts):
        if text is not None:
            ax.annotate(
                text,
                (1.0, yi),
                xycoords=("axes fraction", "data"),
                xytext=(2, 0),
                textcoords="offset points",
                ha="left",
                va="center",
                fontsize=fontsize,
                color="#444444",
                annotation_clip=False,
            )


def interval_points(
    ax,
    rows: pd.DataFrame,
    key: str,
    specs: list[str],
    y,
    *,
    marker: str = "o",
    size: float = 4.5,
    hollow: bool = True,
    elinewidth: float = 0.8,
) -> None:
    """One point per policy at heights ``y`` (``rows`` indexed like ``specs``): the key's estimate
    and its interval in the policy's colour, white inside when ``hollow``; none where unknown."""
    est, err = value(rows, key), interval(rows, key)
    for i, spec in enumerate(specs):
        if np.isnan(est.iloc[i]):
            continue
        ax.errorbar(
            [est.iloc[i]],
            [y[i]],
            xerr=None if err is None else err[:, i : i + 1],
            fmt=marker,
            color=style.policy_color(spec),
            markersize=size,
            markerfacecolor="white" if hollow else style.policy_color(spec),
            elinewidth=elinewidth,
            zorder=3,
        )
