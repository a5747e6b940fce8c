"""Figure 19: summarizer sensitivity for SU and TRC+SU.

The agent as its own summarizer against smaller summarizers: resolve-rate change and
resource ratios against FC, each with 95 % task-bootstrap intervals. Each summarizer's
runs are compared with the same FC runs on the summarizer cohort.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.patches import Patch

from ctxpolicy.figures import axes as ax_
from ctxpolicy.figures import comparisons, inputs, notes, style
from ctxpolicy.figures.prepared import Prepared

SELF = "self"
PANELS = (("delta_pp", "Δ resolve rate (pp)", 0.0), ("token_ratio", "tokens / FC", 1.0),
          ("latency_ratio", "latency / FC", 1.0), ("cost_ratio", "billed cost / FC", 1.0))
SUMMARIZER_HATCHES = ("", "//", "..", "xx", "\\\\")


def _summarizer(value: Any) -> str:
    return SELF if value is None or pd.isna(value) or str(value) in ("", "None") else str(value)


def compute(runs: pd.DataFrame, config: Mapping[str, Any], *, n_boot: int, seed: int) -> Prepared:
    block = inputs.block(config, "summarizer")
    combos = inputs.combos(config, "summarizer")
    policies = [p for p in block.get("policies") or []]
    notes_: list[str] = []
    if not combos or not policies:
        return Prepared(pd.DataFrame(), ["the config has no summarizer comparison (grid.summarizer)."])
    if not block.get("summarizers"):
        notes_.append("the config lists no other summarizers: only the agent summarizing itself is shown.")
    frames = []
    setting = block.get("setting", "primary")
    for benchmark, model in combos:
        own = comparisons.runs_of(runs, config, benchmark, model, block.get("cohort"))
        fc = own[own["policy"].astype(str) == style.FC]
        mine = own[own["policy"].astype(str).isin(policies)]
        if fc.empty or mine.empty:
            notes_.append(f"no FC or summarizing runs for {model} on {benchmark}.")
            continue
        for name, group in mine.groupby(mine["summarizer"].map(_summarizer), sort=True):
            sub = pd.concat([fc, group])
            data = comparisons.compare_block(sub, config, "summarizer", n_boot=n_boot, seed=seed,
                                             combos=[(benchmark, model)], setting=setting,
                                             policies=policies, own_summarizer=False)
            if not data.empty:
                frames.append(data.table.assign(summarizer=name))
    table = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    return Prepared(table, notes_, {"combos": combos})


def plot(data: Prepared):
    title = "Figure 19: summarizer sensitivity"
    if data.empty:
        return notes.note_figure(title, data.note_text() or "no data")
    combos = ax_.combos_with_data(data, data.meta["combos"])
    fig, grid = ax_.grid(len(combos), len(PANELS), row_height=1.9)
    summarizers = sorted(data.table["summarizer"].unique(), key=lambda s: (s != SELF, s))
    for r, (benchmark, model) in enumerate(combos):
        rows = data.table[(data.table["benchmark"] == benchmark) & (data.table["model"] == model)]
        specs = style.order_policies(rows["policy"])
        for c, (column, label, ref) in enumerate(PANELS):
            ax = grid[r, c]
            width = 0.8 / max(len(summarizers), 1)
            for k, name in enumerate(summarizers):
                part = rows[rows["summarizer"] == name].set_index("policy")
                part = part.reindex([s for s in specs if s in part.index])
                x = np.array([specs.index(s) for s in part.index]) + (k - (len(summarizers) - 1) / 2) * width
                ax.bar(x, part[column].astype(float) - ref, width, bottom=ref,
                       yerr=ax_.interval(part, column), hatch=SUMMARIZER_HATCHES[k % 5],
                       color=[style.policy_color(s) for s in part.index], edgecolor="white",
                       linewidth=0.4, error_kw={"elinewidth": 0.7, "ecolor": "#333333"})
            ax.axhline(ref, color="#666666", linewidth=0.6)
            ax.set_xticks(range(len(specs)), [style.policy_label(s) for s in specs], rotation=20, ha="right")
            ax.set_ylabel(label)
            if c == 0:
                ax.set_title(ax_.combo_title(benchmark, model), loc="left")
    ax_.legend_top(fig, [Patch(facecolor="#808080", edgecolor="white", hatch=SUMMARIZER_HATCHES[k % 5],
                                 label=f"summarizer: {'agent itself' if s == SELF else s}")
                           for k, s in enumerate(summarizers)])
    if data.notes:
        notes.footnote(fig, data.note_text())
    return fig
