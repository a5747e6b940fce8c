"""Beyond the study: billed input cost relative to FC under three cache models.

Exact (prefix cache replayed over the recorded messages), estimated (local token counts)
and measured (the server's reported cached tokens), side by side per policy. One panel per
(benchmark, model) pair, benchmarks in rows and models in columns (``axes.pair_facets``);
``pairs`` restricts the pairs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.patches import Patch

from ctxpolicy.figures import axes as ax_
from ctxpolicy.figures import comparisons, notes, style
from ctxpolicy.figures.prepared import Prepared


def methods() -> tuple[tuple[str, str, str], ...]:
    """(ratio column, method name, hatch) of every cost method (``metrics.cost_methods``)."""
    from ctxpolicy.figures.cost_methods import methods as registry

    return tuple((f"cost_ratio_{name}", name, hatch) for name, _, hatch in registry())


def compute(
    runs: pd.DataFrame, config: Mapping[str, Any], *, n_boot: int, seed: int, pairs: list[tuple[str, str]] | None = None
) -> Prepared:
    return comparisons.compare_full_comparison(runs, config, n_boot=n_boot, seed=seed, pairs=pairs)


def plot(data: Prepared, name: str = "cost_models"):
    title = ax_.figure_title(
        name,
        "billed input cost relative to FC by cache model "
        f"({style.threshold_label(data.meta.get('setting', 'primary')).lower()} threshold, D = 0.5)",
    )
    combos = ax_.combos_with_data(data, data.meta.get("combos") or [])
    if not combos:
        return notes.note_figure(title, data.notes)
    specs = style.order_policies(data.table["policy"].astype(str).unique())
    models = len({m for _, m in combos})
    fig, panels = ax_.pair_facets(
        combos, panel_height=max(1.3, 0.28 * len(specs) + 0.6), width=min(style.FULL_WIDTH, 2.4 * models + 0.9)
    )
    METHODS = methods()
    height = 0.8 / len(METHODS)
    y = np.arange(len(specs))[::-1].astype(float)
    for (benchmark, model), ax in panels.items():
        rows = data.table[(data.table["benchmark"] == benchmark) & (data.table["model"] == model)]
        rows = rows.drop_duplicates("policy").set_index(rows["policy"].astype(str).drop_duplicates()).reindex(specs)
        missing = []
        for k, (column, label, hatch) in enumerate(METHODS):
            if f"{column}_est" not in rows or rows[f"{column}_est"].isna().all():
                missing.append(label)
                continue
            ax.barh(
                y + ((len(METHODS) - 1) / 2 - k) * height,
                ax_.value(rows, column) - 1.0,
                height,
                left=1.0,
                xerr=ax_.interval(rows, column),
                hatch=hatch,
                label=label,
                color=[style.policy_color(p) for p in specs],
                edgecolor="white",
                linewidth=0.4,
                error_kw={"elinewidth": 0.6, "ecolor": "#333333"},
            )
        ax.axvline(1.0, color="#666666", linewidth=0.6)
        ax.set_ylim(-0.6, len(specs) - 0.4)
        ax.set_yticks(y, style.row_labels(specs))
        ax.grid(axis="y", visible=False)
        notes.note_if_empty(ax, notes.about(data.notes, model, benchmark))
        if missing and len(missing) < len(METHODS):
            message = f"not available: {', '.join(missing)}"
            ax.text(
                0.99, 0.01, message, transform=ax.transAxes, ha="right", va="bottom", fontsize=6, color=notes.NOTE_COLOR
            )
            notes.record(fig, f"{ax_.combo_title(benchmark, model)}: {message}.")
    ax_.hide_inner_labels(panels)
    fig.supxlabel("billed input cost / FC", fontsize=7)
    ax_.legend_top(
        fig,
        [Patch(facecolor="#808080", edgecolor="white", hatch=h, label=f"{name} cache model") for _, name, h in METHODS]
        + ax_.policy_handles(specs),
        ncol=4,
        title=title,
    )
    gaps = [n for n in data.notes if "resource ratios" in n]
    return notes.finish(fig, data.notes, empty_panel=" ".join(gaps) or None)
