"""Beyond the study: what a policy costs relative to FC as the cache changes.

Per policy of the full comparison (its setting), two panels per (benchmark, model) pair:
the billed-input ratio to FC under every cache model of the cost-method registry that the runs
allow (``metrics.cost_methods``; bars, 95 % task-bootstrap intervals; a model the runs cannot
price is named in the panel), and under the study's cost method (``metrics.cost_method``) at
cache-read discounts 0.1, 0.25, 0.5 and 1.0 (no cache), with the break-even discount at which
the policy's bill crosses FC's written at the right. The numbers are
``metrics.sensitivity.cost_sensitivity`` (the same as ``ctxpolicy compare --view cost-models``);
this module draws them. Rows: benchmark and model pairs; ``pairs`` restricts the pairs.

``imported_cost_sensitivity`` is the same figure on the config's imported corpus
(``compute_imported``): the full comparison's policies replayed over it (``ctxpolicy replay``,
the replay table ``imported_replay`` reads), each against the FC replay; its exact and
measured-profile ratios are ``imported_replay``'s by-cache ones.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from ctxpolicy.figures import axes as ax_
from ctxpolicy.figures import comparisons, imported_replay, inputs, notes, style
from ctxpolicy.figures.prepared import Prepared
from ctxpolicy.metrics.sensitivity import DISCOUNTS, cost_sensitivity, discount_ratio
from ctxpolicy.study import IMPORTED_TRACK, Study

STEM = "cost_sensitivity"
HATCHES = ("", "//", "..", "xx", "\\\\", "++", "oo", "--")  # one per cost method, in the registry's order
MARKERS = ("o", "s", "^", "D")  # one per discount of DISCOUNTS


def methods() -> tuple[tuple[str, str, str], ...]:
    """(ratio key, method name, hatch) of every method of the cost-method registry, in its order."""
    from ctxpolicy.metrics import cost_methods

    return tuple(
        (f"cost_ratio_{m.name}", m.name, HATCHES[k % len(HATCHES)]) for k, m in enumerate(cost_methods.methods())
    )


def compute(
    runs: pd.DataFrame, study: Study, *, n_boot: int, seed: int, pairs: list[tuple[str, str]] | None = None
) -> Prepared:
    own = inputs.select_pairs(runs, pairs)
    return comparisons.compare_full_comparison(
        own, study, n_boot=n_boot, seed=seed, metric=cost_sensitivity, pairs=pairs
    )


def _setting_of(value: Any) -> str | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else str(value)


def compute_imported(replays: pd.DataFrame, study: Study, *, n_boot: int, seed: int) -> Prepared:
    """The imported corpus's replays (``imported_replay.read_replays``) of the full comparison's
    policies at its setting (FC's replay the baseline), one row per policy; a note for each
    policy without replays, for a corpus without an FC replay and for one whose source calls
    carry no provider cached tokens (no measured profile: ``imported_replay.NO_MEASURED_HITS``)."""
    setting = study.section("full_comparison")["setting"]
    wanted = [(c.policy, c.setting) for c in study.configurations("full_comparison")]
    combos = [(p.benchmark, p.model) for p in study.pairs(IMPORTED_TRACK)]
    meta = {"combos": combos, "setting": setting, "cost_method": study.cost_method, "imported": True}
    if not combos:
        return Prepared(pd.DataFrame(), ["the config has no imported block: nothing to draw."], meta)
    if replays.empty:
        return Prepared(pd.DataFrame(), ["no replay runs of the imported corpus (workflow/rules/imported.smk)."], meta)
    wanted_keys = set(wanted)
    keys = zip(replays["policy"].astype(str), map(_setting_of, replays["setting"].astype("object")))
    chosen = replays[[key in wanted_keys for key in keys]]
    frames, said = [], []
    for benchmark, model in combos:
        own = inputs.select(chosen, benchmark=benchmark, model=model)
        replayed = set(zip(own["policy"].astype(str), map(_setting_of, own["setting"].astype("object"))))
        for policy, at in wanted:
            if (policy, at) not in replayed and policy != style.FC:
                said.append(
                    f"{policy}{f' at the {at} threshold' if at else ''}: no replay runs ({model} on {benchmark})."
                )
        try:
            table = cost_sensitivity(
                own,
                model=model,
                benchmark=benchmark,
                cost_method=study.cost_method,
                n_boot=n_boot,
                seed=seed,
                replays=True,
            )
        except ValueError:
            said.append(f"no FC replay of the imported corpus ({model} on {benchmark}).")
            continue
        frames.append(table)
    table = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    if frames and not imported_replay.measured_hits(chosen)[0]:
        said.append(imported_replay.NO_MEASURED_HITS)
    if frames and imported_replay.placeholder_summaries(chosen):
        said.append(imported_replay.PLACEHOLDER_SUMMARIES)
    return Prepared(table, said, meta, n=notes.sample_size(chosen))


def break_even_text(value: float) -> str:
    """A break-even discount as the figure and ``compare --view cost-models`` print it."""
    return "none" if value is None or math.isnan(value) else f"{value:.2f}"


def _models_panel(ax, rows: pd.DataFrame, specs: list[str], y: np.ndarray) -> list[str]:
    """Bars per cache model; returns the models without a ratio in this panel."""
    drawn = [m for m in methods() if f"{m[0]}_est" in rows and rows[f"{m[0]}_est"].notna().any()]
    heights, height = ax_.side_by_side(y, len(drawn))
    for at, (key, label, hatch) in zip(heights, drawn):
        ax.barh(
            at,
            ax_.value(rows, key) - 1.0,
            height,
            left=1.0,
            xerr=ax_.interval(rows, key),
            hatch=hatch,
            label=label,
            color=[style.policy_color(p) for p in specs],
            edgecolor="white",
            linewidth=0.4,
            error_kw={"elinewidth": 0.6, "ecolor": "#333333"},
        )
    return [name for _, name, _ in methods() if name not in {m[1] for m in drawn}]


def _discount_panel(ax, rows: pd.DataFrame, specs: list[str], y: np.ndarray, method: str) -> None:
    """Points per discount, joined per policy; the break-even discount at the right."""
    for k, d in enumerate(DISCOUNTS):
        offset = ((len(DISCOUNTS) - 1) / 2 - k) * 0.16
        look = {"marker": MARKERS[k % len(MARKERS)], "size": 3.5, "hollow": d == 1.0, "elinewidth": 0.6}
        ax_.interval_points(ax, rows, discount_ratio(d), specs, y + offset, **look)
    column = f"break_even_{method}"
    for i in range(len(specs)):
        value = rows[column].iloc[i] if column in rows else math.nan
        ax.text(1.01, y[i], f"d* {break_even_text(value)}", transform=ax.get_yaxis_transform(), fontsize=6, va="center")


def plot(data: Prepared, name: str = STEM):
    method = data.meta.get("cost_method", "estimated")
    replayed = "imported corpus replayed: " if data.meta.get("imported") else ""
    title = ax_.figure_title(
        name,
        f"{replayed}billed input / FC by cache model and cache-read discount "
        f"({ax_.setting_words(data.meta)} threshold)",
    )
    combos = ax_.combos_with_data(data, data.meta.get("combos") or [])
    if not combos:
        return notes.note_figure(title, data.said())
    specs = ax_.policies_drawn(data)
    fig, grid = ax_.grid(len(combos), 2, row_height=max(1.8, 0.28 * len(specs) + 0.6), sharey=True)
    y = np.arange(len(specs))[::-1].astype(float)
    for r, ((benchmark, model), (left, right)) in enumerate(zip(combos, grid)):
        rows = ax_.pair_rows(data.table, benchmark, model, specs, first=True)
        missing = _models_panel(left, rows, specs, y)
        _discount_panel(right, rows, specs, y, method)
        for ax in (left, right):
            ax.axvline(1.0, color="#666666", linewidth=0.6)
            ax_.policy_rows(ax, y, specs, labels=False)
            notes.note_if_empty(ax, notes.about(data.notes, model, benchmark))
        left.set_yticks(y, style.row_labels(specs))
        left.set_ylabel(f"{model}\n{benchmark}", fontweight="bold")
        if r == 0:
            left.set_title("by cache model")
            right.set_title(f"{method}, by cache-read discount d")
        if missing:
            message = f"not available: {', '.join(missing)}"
            look = {"ha": "right", "va": "bottom", "fontsize": 6, "color": notes.NOTE_COLOR}
            left.text(0.99, 0.01, message, transform=left.transAxes, **look)
            notes.record(fig, f"{ax_.combo_title(benchmark, model)}: {message}.")
    fig.supxlabel("billed input cost / FC", fontsize=7)
    handles = [Patch(facecolor="#808080", edgecolor="white", hatch=h, label=m) for _, m, h in methods()]
    handles += [
        Line2D([], [], linestyle="none", marker=MARKERS[k % len(MARKERS)], color="#808080", label=f"d = {d:g}")
        for k, d in enumerate(DISCOUNTS)
    ]
    ax_.legend_top(fig, handles + ax_.policy_handles(specs), ncol=5, title=title)
    footer = (
        f"d*: the discount at which the policy's {method} bill equals FC's (none: no crossing in [0, 1]); "
        "d = 1: no cache. Intervals: 95 % task bootstrap."
    )
    if replayed:
        footer += " Replays of the imported trajectories (agent's actions fixed) against the FC replay."
    return notes.finish(fig, data.said(footer))
