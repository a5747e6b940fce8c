"""Figure 5: (a) within-model ranks of the policies on resolve rate, latency and billed cost,
best values outlined, on one benchmark (the catalog's ``ranks_benchmark``: a benchmark name, or
``first``, the first benchmark of the pairs shown; SWE-bench in config/paper.yaml, as the study's
caption has it); (b) the study's paired resolve-rate differences (first policy minus second) on
every benchmark and model shown, with 95 % task-bootstrap intervals, ∗ where the interval
excludes zero."""

from __future__ import annotations


import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.patches import Rectangle

from ctxpolicy.figures import axes as ax_
from ctxpolicy.figures import comparisons, inputs, notes, style
from ctxpolicy.figures.prepared import Prepared
from ctxpolicy.study import Study

# (A, B) by primitive, drawn as A − B: the study's four pairs (S is the structured summary).
PAIRS = (("S-p", "S"), ("TRC+S", "S"), ("OTRC", "TRC"), ("OTRC+S-p", "OTRC"))
RANKED = (("resolve_rate", "resolve", False), ("latency_ratio_est", "latency", True), ("cost_ratio_est", "cost", True))
SIGNIFICANT = "∗"
RANK_DECIMALS = 12  # values closer than this rank as equal (floating-point noise, not a difference)
RANK_CMAP = "Blues_r"  # darker = better (rank 1 darkest)


FIRST = "first"


def ranked_benchmark(combos: list[tuple[str, str]], wanted: str | None) -> tuple[str | None, list[str]]:
    """The benchmark (a) ranks: ``wanted`` when a shown pair has it, the first pair's for ``first``
    or None; with a note when ``wanted`` names a benchmark no shown pair has."""
    benchmarks = list(dict.fromkeys(b for b, _ in combos))
    if not benchmarks:
        return None, []
    if wanted in (None, "", FIRST):
        return benchmarks[0], []
    if wanted in benchmarks:
        return wanted, []
    return benchmarks[0], [
        f"ranks_benchmark {wanted!r} is none of the shown pairs' benchmarks ({', '.join(benchmarks)}); (a) ranks {benchmarks[0]}."
    ]


def compute(
    runs: pd.DataFrame,
    study: Study,
    *,
    n_boot: int,
    seed: int,
    pairs: list[tuple[str, str]] | None = None,
    ranks_benchmark: str | None = FIRST,
) -> Prepared:
    """``pairs``: the (model, benchmark) pairs to compare (None: all of the full comparison's);
    (a) ranks the pairs of ``ranks_benchmark`` (``ranked_benchmark``), (b) draws every pair."""
    setting = study.section("full_comparison")["setting"]
    combos, said = comparisons.pair_combos(study, "full_comparison", pairs)
    runs = inputs.select_pairs(runs, pairs)
    compared = comparisons.compare_block(
        runs,
        study,
        "full_comparison",
        n_boot=n_boot,
        seed=seed,
        setting=setting,
        combos=combos,
        policies=comparisons.policies_of(study, "full_comparison"),
    )
    ranked, rank_note = ranked_benchmark(list(compared.meta["combos"]), ranks_benchmark)
    ranks = rank_table(compared.table) if not compared.empty else pd.DataFrame()
    if not ranks.empty:
        ranks = ranks[ranks["benchmark"].astype(str) == str(ranked)].reset_index(drop=True)
    pair_table, pair_notes = paired(runs, study, compared.table, n_boot=n_boot, seed=seed)
    return Prepared(
        ranks,
        said + compared.notes + rank_note + pair_notes,
        {
            "combos": compared.meta["combos"],
            "ranks_benchmark": ranked,
            "compared_combos": _compared_combos(compared.table, list(compared.meta["combos"])),
            "pairs": pair_table,
            "cost_method": compared.meta["cost_method"],
            "attempts": study.attempts,
        },
        {"ranks": ranks, "pairs": pair_table},
        n=compared.n,
    )


def _compared_combos(compared: pd.DataFrame, combos: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The pairs with comparison rows, in the figure's order: (b) draws a panel for each."""
    if compared.empty:
        return []
    present = set(zip(compared["benchmark"].astype(str), compared["model"].astype(str)))
    return [c for c in combos if c in present]


def rank_table(compared: pd.DataFrame) -> pd.DataFrame:
    """Per (benchmark, model): FC and each policy ranked on each measure (1 = best)."""
    frames = []
    for (benchmark, model), rows in compared.groupby(["benchmark", "model"], sort=False):
        fc = pd.DataFrame(
            [
                {
                    "policy": style.FC,
                    "resolve_rate": rows["baseline_resolve_rate"].iloc[0],
                    "latency_ratio_est": 1.0,
                    "cost_ratio_est": 1.0,
                }
            ]
        )
        both = pd.concat(
            [fc, rows[["policy", "resolve_rate", "latency_ratio_est", "cost_ratio_est"]]], ignore_index=True
        ).assign(policy=lambda t: t["policy"].astype(str))
        for column, _, ascending in RANKED:
            # equal values reached in a different summation order (7/18 as 0.38888888888888884 and
            # as 0.3888888888888889) are a tie, not two ranks: compare at RANK_DECIMALS places
            both[f"{column}_rank"] = both[column].round(RANK_DECIMALS).rank(ascending=ascending, method="min")
        frames.append(both.assign(benchmark=benchmark, model=model))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _cell_of(compared: pd.DataFrame, primitive: str) -> str | None:
    rows = compared[compared["policy"].astype(str).map(style.primitive_of) == primitive]
    return str(rows["cell"].iloc[0]) if len(rows) else None


def paired(
    runs: pd.DataFrame, study: Study, compared: pd.DataFrame, *, n_boot: int, seed: int
) -> tuple[pd.DataFrame, list[str]]:
    from ctxpolicy.metrics.compare import paired_differences

    frames, missing = [], set()
    for (benchmark, model), rows in compared.groupby(["benchmark", "model"], sort=False) if not compared.empty else []:
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
        own = comparisons.runs_of(runs, study, benchmark, model)
        table = paired_differences(own, model=model, benchmark=benchmark, pairs=pairs, n_boot=n_boot, seed=seed)
        frames.append(table.assign(benchmark=benchmark, model=model, pair=labels))
    note = [f"pairs without both policies in the config or runs: {', '.join(sorted(missing))}."] if missing else []
    if frames:  # a pair whose policies share no task has no difference to draw
        undefined = [p for f in frames for p in f.loc[f["diff_pp"].isna(), "pair"]]
        if undefined:
            note.append(f"no shared task for {', '.join(sorted(set(undefined)))}: no difference drawn.")
    return (pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()), note


def plot(data: Prepared, name: str = "fig5"):
    title = f"{style.figure_name(name)}: policy ranks and paired differences"
    if data.empty:
        return notes.note_figure(title, data.notes)
    combos = data.meta.get("compared_combos", ax_.combos_with_data(data, data.meta["combos"]))
    ranked = ax_.combos_with_data(data, combos)
    specs = style.order_policies(data.table["policy"])
    # plt.subplots, not a FacetGrid: (a) is one heatmap across pairs, (b) a panel per pair beneath it
    fig = plt.figure(figsize=(style.FULL_WIDTH, 0.2 * len(specs) + 3.3), layout="constrained")
    top, bottom = fig.subfigures(2, 1, height_ratios=[0.2 * len(specs) + 1.2, 2.0])
    _heatmap(top.subplots(), data.table, ranked, specs)
    top.suptitle(
        f"(a) rank within model on {data.meta.get('ranks_benchmark')} (1 = best, darker = better; "
        f"outlined: best; cost: {data.meta.get('cost_method')} method)",
        x=0.01,
        ha="left",
        fontsize=8,
    )
    fig.suptitle(
        f"{title} (primary threshold; depth-tunable policies at D = 0.5; "
        f"{data.meta.get('attempts', 1)} attempt(s) per task)",
        x=0.01,
        ha="left",
    )
    pairs = data.meta["pairs"]
    ncols = min(3, max(1, len(combos)))  # at most three pair panels a row: their titles and ticks stay legible
    nrows = -(-max(1, len(combos)) // ncols)
    axs = bottom.subplots(nrows, ncols, squeeze=False, sharex=True, sharey=True).ravel()
    for ax in axs[len(combos) :]:
        ax.set_visible(False)
    bottom.suptitle(
        f"(b) paired resolve-rate differences (pp, first − second), 95 % intervals; {SIGNIFICANT} excludes 0",
        x=0.01,
        ha="left",
        fontsize=8,
    )
    for ax, (benchmark, model) in zip(axs, combos):
        rows = pairs[(pairs["benchmark"] == benchmark) & (pairs["model"] == model)] if not pairs.empty else pairs
        ax.set_title(ax_.combo_title(benchmark, model), loc="left")
        if rows.empty:
            notes.note_on_axes(ax, "no policy pair of the study in this comparison", width=28)
            continue
        y = np.arange(len(rows))[::-1]
        ax.errorbar(
            rows["diff_pp"],
            y,
            xerr=ax_.interval(rows, "diff_pp"),
            fmt="o",
            color="#333333",
            elinewidth=0.8,
            markersize=4,
        )
        for yi, (_, r) in zip(y, rows.iterrows()):
            if r["excludes_zero"]:
                ax.annotate(
                    SIGNIFICANT,
                    (r["diff_pp_hi"], yi),
                    xytext=(3, 0),
                    textcoords="offset points",
                    va="center",
                    fontsize=7,
                )
        ax.axvline(0, color="#666666", linewidth=0.6)
        ax.set_yticks(y, rows["pair"])
        ax.grid(axis="y", visible=False)
    for ax in axs[max(0, len(combos) - ncols) : len(combos)]:
        ax.set_xlabel("Δ resolve (pp)")
    return notes.finish(fig, data.said())


def _heatmap(ax, table: pd.DataFrame, combos, specs) -> None:
    """Ranks as a seaborn heatmap: a row per policy, a column per pair and measure; darker is
    better, the rank written in each cell, rank 1 outlined, pairs separated by white lines."""
    columns = [(b, m, c, label) for b, m in combos for c, label, _ in RANKED]
    grid = np.full((len(specs), len(columns)), np.nan)
    for j, (b, m, c, _) in enumerate(columns):
        rows = table[(table["benchmark"] == b) & (table["model"] == m)].set_index("policy")
        grid[:, j] = rows[f"{c}_rank"].reindex(specs).to_numpy(dtype=float)
    worst = max(2.0, float(np.nanmax(grid)) if np.isfinite(grid).any() else 2.0)
    frame = pd.DataFrame(grid, index=[style.short_label(s) for s in specs], columns=[label for *_, label in columns])
    style.seaborn().heatmap(
        frame,
        ax=ax,
        cmap=RANK_CMAP,
        vmin=1,
        vmax=worst,
        annot=True,
        fmt=".0f",
        cbar=False,
        linewidths=0.5,
        linecolor="white",
        mask=frame.isna(),
        annot_kws={"fontsize": 5.5},
    )
    for i, j in zip(*np.nonzero(grid == 1)):
        ax.add_patch(Rectangle((j, i), 1, 1, fill=False, edgecolor="black", linewidth=1.1))
    ax.tick_params(axis="x", rotation=90, labelsize=6, length=0)
    ax.tick_params(axis="y", rotation=0, labelsize=6.5, length=0)
    for tick, spec in zip(ax.get_yticklabels(), specs):
        tick.set_color(style.policy_color(spec))
    for k, (b, m) in enumerate(combos):
        ax.text(3 * k + 1.5, -0.3, f"{m}\n{b}", ha="center", va="bottom", fontsize=6)
        if k:
            ax.axvline(3 * k, color="white", linewidth=2.5)
    ax.set_xlabel("")
    ax.set_ylabel("")
