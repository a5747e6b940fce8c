"""Small drawing helpers shared by the figures: interval points, legends, reference lines."""

from __future__ import annotations

from collections.abc import Iterable

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
    look = {"elinewidth": 0.8, "markersize": 5, "markeredgecolor": "white", "markeredgewidth": 0.4,
            "zorder": 3}
    if kw.get("markerfacecolor") == "none":
        look.update(markeredgecolor=color, markeredgewidth=0.9)
    ax.errorbar([x], [y], xerr=xerr, yerr=yerr, fmt=style.policy_marker(spec), color=color,
                ecolor=color, **{**look, **kw})


def policy_handles(specs: Iterable[str], settings: dict[str, str] | None = None) -> list[Line2D]:
    return [Line2D([], [], linestyle="none", marker=style.policy_marker(s),
                   color=style.policy_color(s), markersize=5,
                   label=style.policy_label(s, (settings or {}).get(s)))
            for s in specs]


def legend_top(fig, handles, ncol: int | None = None) -> None:
    """One legend for the whole figure, above the panels (needs a constrained layout)."""
    if not handles:
        return
    fig.legend(handles=handles, loc="outside upper center", ncol=ncol or min(len(handles), 6),
               frameon=False, handletextpad=0.3, columnspacing=1.0)


def combos_with_data(data, combos) -> list[tuple[str, str]]:
    """The (benchmark, model) pairs that have rows; the others are already in the notes."""
    if data.empty:
        return []
    present = set(zip(data.table["benchmark"].astype(str), data.table["model"].astype(str)))
    return [c for c in combos if c in present]


def grid(nrows: int, ncols: int, *, width: float = style.FULL_WIDTH, row_height: float = 1.9,
         **kw):
    fig, axes = plt.subplots(nrows, ncols, figsize=(width, row_height * nrows + 0.3),
                             squeeze=False, layout="constrained", **kw)
    return fig, axes


def combo_title(benchmark: str, model: str) -> str:
    return f"{model} · {benchmark}"
