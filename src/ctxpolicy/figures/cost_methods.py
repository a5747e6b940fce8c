"""Beyond the study: the cost model against the server's own counts. For each policy of the full
comparison (FC included), the mean billed input per run under every method of the cost-method
registry side by side (``metrics.cost_methods.TABLE``: estimated, the study's reconstruction;
exact, the prefix-cache simulation over the recorded messages; measured, the server- or
provider-reported cached tokens; the provider cache models), in tokens, not relative to FC, so
that the figure shows how far each model is from the real bill.

Numbers are ``runs.parquet``'s ``billed_*`` columns (the runs' calls priced by
``ctxpolicy.metrics.cost_methods``, the same as ``ctxpolicy cost --runs``); a
method whose mean is more than ``metrics.cost.DISAGREEMENT_MARGIN`` from the reference (measured
where every run has it, else exact) is a note (``metrics.cost.disagreements``). Layout: one panel
per (benchmark, model) pair (``axes.pair_facets``), policies on the y axis; ``pairs`` restricts
the pairs.
"""

from __future__ import annotations


import numpy as np
import pandas as pd
from matplotlib.patches import Patch

from ctxpolicy.figures import axes as ax_
from ctxpolicy.figures import comparisons, inputs, notes, style
from ctxpolicy.figures.prepared import Prepared
from ctxpolicy.study import Study

STEM = "cost_methods"
HATCHES = ("", "//", "..", "xx", "\\\\", "++", "oo", "--")  # one per cost method, in the registry's order


def methods() -> tuple[tuple[str, str, str], ...]:
    """(name, runs column, hatch) of every method of the cost-method registry, in its order."""
    from ctxpolicy.metrics import cost_methods

    return tuple((m.name, m.billed_column, HATCHES[k % len(HATCHES)]) for k, m in enumerate(cost_methods.methods()))


def compute(runs: pd.DataFrame, study: Study, pairs: list[tuple[str, str]] | None = None) -> Prepared:
    from ctxpolicy.metrics import cost_methods
    from ctxpolicy.metrics.cost import DISAGREEMENT_MARGIN, disagreements

    METHODS = methods()
    checked = {m.name for m in cost_methods.methods() if m.compared} | {"measured"}

    block = study.section("full_comparison")
    setting = block["setting"]
    policies = [style.FC, *comparisons.policies_of(study, "full_comparison")]
    combos, found = comparisons.pair_combos(study, "full_comparison", pairs)
    if not combos:
        found.append("the config has no grid.full_comparison block with models and benchmarks.")
    rows, drawn = [], []  # drawn: the runs behind the bars, for the figure's n
    for benchmark, model in combos:
        own = comparisons.runs_of(runs, study, benchmark, model)
        if own.empty:
            found.append(notes.why_no_runs(model, benchmark))
            continue
        own = own[inputs.setting_matches(own["setting"], setting).to_numpy()]
        drawn.append(own[own["policy"].astype(str).isin(policies)])
        for policy in policies:
            mine = own[own["policy"].astype(str) == policy]
            if mine.empty:
                continue
            row = {"benchmark": benchmark, "model": model, "policy": policy, "n_runs": len(mine)}
            for method, column, _ in METHODS:
                values = (
                    pd.to_numeric(mine[column], errors="coerce")
                    if column in mine
                    else pd.Series(np.nan, index=mine.index)
                )
                # a method counts only when every run has it (measured: the server reported cached tokens)
                row[method] = float(values.mean()) if values.notna().all() else float("nan")
            billed = {m: (None if np.isnan(row[m]) else row[m]) for m, _, _ in METHODS}
            reference = "measured" if billed["measured"] is not None else "exact"
            row["reference"] = reference
            for method, _, _ in METHODS:
                base = billed[reference]
                row[f"{method}_gap"] = (
                    float("nan") if billed[method] is None or not base else billed[method] / base - 1.0
                )
            row["disagrees"] = bool(disagreements({m: v for m, v in billed.items() if m in checked}))
            rows.append(row)
        mine = [r for r in rows if (r["benchmark"], r["model"]) == (benchmark, model)]
        if mine and all(np.isnan(r["measured"]) for r in mine):
            found.append(f"no measured bill for {model} on {benchmark}: the server reported no cached tokens.")
        if off := [r for r in mine if r["disagrees"]]:
            found.append(
                f"{model} on {benchmark}: {len(off)} of {len(mine)} policies have a method more than "
                f"{DISAGREEMENT_MARGIN:.0%} from the {off[0]['reference']} bill (the data's *_gap columns)."
            )
    return Prepared(pd.DataFrame(rows), found, {"combos": combos, "setting": setting}, n=notes.sample_size(drawn))


def plot(data: Prepared, name: str = STEM):
    title = ax_.figure_title(
        name,
        f"billed input per run: {', '.join(m for m, _, _ in methods())} ({ax_.setting_words(data.meta)} threshold)",
    )
    combos = ax_.combos_with_data(data, data.meta.get("combos") or [])
    if not combos:
        return notes.note_figure(title, data.said())
    specs = ax_.policies_drawn(data)
    fig, panels = ax_.policy_facets(combos, specs, per_policy=0.28)
    METHODS = [m for m in methods() if m[0] in data.table]
    y = np.arange(len(specs))[::-1].astype(float)
    heights, height = ax_.side_by_side(y, len(METHODS))
    for (benchmark, model), ax in panels.items():
        rows = ax_.pair_rows(data.table, benchmark, model, specs)
        for at, (method, _, hatch) in zip(heights, METHODS):
            values = rows[method].astype(float).to_numpy() / 1000.0
            ax.barh(
                at,
                np.nan_to_num(values),
                height,
                hatch=hatch,
                color=[style.policy_color(p) for p in specs],
                edgecolor="white",
                linewidth=0.4,
            )
        ax_.policy_rows(ax, y, specs)
        notes.note_if_empty(ax, notes.about(data.notes, model, benchmark))
    ax_.hide_inner_labels(panels)
    fig.supxlabel("mean billed input per run (k tokens)", fontsize=7)
    ax_.legend_top(
        fig,
        [Patch(facecolor="#808080", edgecolor="white", hatch=h, label=m) for m, _, h in METHODS]
        + ax_.policy_handles(specs),
        ncol=4,
        title=title,
    )
    return notes.finish(fig, data.said())
