"""The numbers the study's observations quote, drawn (``ctxpolicy.metrics.quoted`` owns each).

* ``quoted_calls``: agent calls and mean per-call latency relative to FC, per policy (ratios with
  their paired task-bootstrap intervals; ``calls_ratio_*``, ``per_call_latency_ratio_*``).
* ``quoted_summary_share``: the summary calls' share of the agent's time, for SU, S, SU-p and S-p
  (``summary_share``; a ratio of task means, no interval).
* ``quoted_shared_tokens``: total tokens relative to FC per policy (``tokens_ratio_*``).
* The three above and ``quoted_compressions`` follow A.5's step rule: successful attempts on the
  tasks both FC and the policy solve, task means first.
* ``quoted_compressions``: compressions per run on the tasks both FC and the policy solve
  (``compressions_per_run``, ``shared_solved_tasks``).
* ``peak_context``: the FC runs' peak prompt tokens per pair with the pair's three thresholds
  (Table 6's) marked, and the share of peaks above each (``share_above_{setting}``).

The same functions print the same numbers as ``ctxpolicy compare --view``. Layout: benchmarks in
rows, models in columns (``axes.pair_facets``), full comparison at its threshold setting.
"""

from __future__ import annotations


import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from ctxpolicy.figures import axes as ax_
from ctxpolicy.figures import comparisons, inputs, notes, style, tables
from ctxpolicy.figures.prepared import Prepared
from ctxpolicy.metrics import quoted
from ctxpolicy.study import Study

RATIOS = (("calls_ratio", "agent calls", "o"), ("per_call_latency_ratio", "per-call latency", "s"))


TOKENS = (("tokens_ratio", "total tokens", "o"),)


def _calls_metric(runs, *, model, benchmark, attempts, n_boot, seed, **_):
    return quoted.calls_latency(runs, model=model, benchmark=benchmark, attempts=attempts, n_boot=n_boot, seed=seed)


def _share_metric(runs, *, model, benchmark, attempts, **_):
    return quoted.summary_share(runs, model=model, benchmark=benchmark, attempts=attempts)


def _tokens_metric(runs, *, model, benchmark, attempts, n_boot, seed, **_):
    return quoted.shared_tokens(runs, model=model, benchmark=benchmark, attempts=attempts, n_boot=n_boot, seed=seed)


def _compressions_metric(runs, *, model, benchmark, attempts, **_):
    return quoted.compressions_shared(runs, model=model, benchmark=benchmark, attempts=attempts)


def _compute(metric, runs, study, *, n_boot: int, seed: int, pairs) -> Prepared:
    return comparisons.compare_full_comparison(runs, study, n_boot=n_boot, seed=seed, metric=metric, pairs=pairs)


def compute_calls(runs: pd.DataFrame, study: Study, *, n_boot: int, seed: int, pairs=None) -> Prepared:
    return _compute(_calls_metric, runs, study, n_boot=n_boot, seed=seed, pairs=pairs)


def compute_shared_tokens(runs: pd.DataFrame, study: Study, *, n_boot: int, seed: int, pairs=None) -> Prepared:
    return _no_shared_note(_compute(_tokens_metric, runs, study, n_boot=n_boot, seed=seed, pairs=pairs))


def _no_shared_note(data: Prepared) -> Prepared:
    if not data.empty:
        none = data.table.loc[data.table["shared_solved_tasks"] == 0, ["policy", "model", "benchmark"]]
        for (model, benchmark), rows in none.groupby(["model", "benchmark"], sort=False):
            data.notes.append(
                f"no task solved by both FC and {', '.join(style.order_policies(rows['policy'].astype(str)))} "
                f"({model} on {benchmark})."
            )
    return data


def compute_summary_share(runs: pd.DataFrame, study: Study, *, n_boot: int = 0, seed: int = 0, pairs=None) -> Prepared:
    data = _compute(_share_metric, runs, study, n_boot=n_boot, seed=seed, pairs=pairs)
    if not data.empty:
        none = data.table.loc[data.table["solved_runs"] == 0, ["policy", "model", "benchmark"]]
        for (model, benchmark), rows in none.groupby(["model", "benchmark"], sort=False):
            data.notes.append(
                f"no solved run of {', '.join(style.order_policies(rows['policy'].astype(str)))} "
                f"({model} on {benchmark}): no share."
            )
    return data


def compute_compressions(runs: pd.DataFrame, study: Study, *, n_boot: int = 0, seed: int = 0, pairs=None) -> Prepared:
    return _no_shared_note(_compute(_compressions_metric, runs, study, n_boot=n_boot, seed=seed, pairs=pairs))


def compute_peaks(runs: pd.DataFrame, study: Study, *, pairs=None, **_) -> Prepared:
    """FC peaks per pair of the full comparison; thresholds from the thresholds files (Table 6)."""
    combos, said = comparisons.pair_combos(study, "full_comparison", pairs)
    thresholds, missing = tables.table6(study, pairs)
    if missing:
        said.append(missing)
    frames, marks, drawn = [], [], []
    for benchmark, model in combos:
        own = inputs.select(runs, benchmark=benchmark, model=model)
        if own.empty:
            said.append(notes.why_no_runs(model, benchmark))
            continue
        if not (own["policy"].astype(str) == style.FC).any():
            said.append(notes.why_no_fc(model, benchmark))
            continue
        peaks = quoted.fc_peaks(own, model=model, benchmark=benchmark)
        if peaks.empty:
            said.append(f"no FC run of {model} on {benchmark} recorded a peak prompt.")
            continue
        frames.append(peaks)
        drawn.append(own[own["policy"].astype(str) == style.FC])
        row = thresholds[(thresholds["benchmark"] == benchmark) & (thresholds["model"] == model)]
        settings = {s: float(row[s].iloc[0]) for s in style.SETTING_ORDER if len(row) and pd.notna(row[s].iloc[0])}
        shares = quoted.share_above(peaks["peak_prompt_tokens"], settings)
        marks.append(
            {
                "benchmark": benchmark,
                "model": model,
                "fc_runs": len(peaks),
                **{f"threshold_{s}": settings.get(s, np.nan) for s in style.SETTING_ORDER},
                **{f"share_above_{s}": shares.get(s, np.nan) for s in style.SETTING_ORDER},
            }
        )
    table = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    extra = {"thresholds": pd.DataFrame(marks)} if marks else {}
    return Prepared(table, said, {"combos": combos}, extra, n=notes.sample_size(drawn, " (FC runs)"))


def _title(data: Prepared, name: str, text: str) -> str:
    return f"{style.figure_name(name)}: {text} ({ax_.setting_words(data.meta)} threshold)"


def _facets(specs: list[str], combos):
    return ax_.policy_facets(combos, specs, per_policy=0.22, base=0.9, least=1.8)


def plot_calls(data: Prepared, name: str = "quoted_calls"):
    title = _title(data, name, "agent calls and per-call latency / FC, shared solved tasks")
    return _ratios(data, title, RATIOS)


def plot_shared_tokens(data: Prepared, name: str = "quoted_shared_tokens"):
    title = _title(data, name, "total tokens / FC, shared solved tasks")
    return _ratios(data, title, TOKENS)


def _ratios(data: Prepared, title: str, ratios):
    combos = ax_.combos_with_data(data, data.meta.get("combos") or [])
    if not combos:
        return notes.note_figure(title, data.notes)
    specs = ax_.policies_drawn(data)
    fig, panels = _facets(specs, combos)
    y = np.arange(len(specs))[::-1].astype(float)
    for (benchmark, model), ax in panels.items():
        rows = ax_.pair_rows(data.table, benchmark, model, specs, first=True)
        offsets = (0.15, -0.15) if len(ratios) > 1 else (0.0,)
        for offset, (key, _, marker) in zip(offsets, ratios):
            ax.errorbar(
                ax_.value(rows, key),
                y + offset,
                xerr=ax_.interval(rows, key),
                fmt=marker,
                markersize=3.5,
                color="#333333",
                ecolor="#777777",
                elinewidth=0.7,
                linestyle="none",
            )
        ax.axvline(1.0, color="#666666", linewidth=0.6)
        ax_.policy_rows(ax, y, specs)
    ax_.hide_inner_labels(panels)
    fig.supxlabel("ratio to FC (successful attempts on tasks both solve, task means; 1 = as FC)", fontsize=7)
    handles = [Line2D([], [], marker=m, color="#333333", linestyle="none", label=label) for _, label, m in ratios]
    ax_.legend_top(fig, handles, ncol=len(ratios), title=title)
    return notes.finish(fig, data.said())


def _bars(data: Prepared, name: str, title: str, key: str, scale: float, xlabel: str, count: str):
    combos = ax_.combos_with_data(data, data.meta.get("combos") or [])
    if not combos:
        return notes.note_figure(title, data.notes)
    specs = ax_.policies_drawn(data)
    fig, panels = _facets(specs, combos)
    y = np.arange(len(specs))[::-1]
    top = max(float(np.nanmax(data.table[key].astype(float).to_numpy() * scale, initial=0.0)), 1e-9)
    for (benchmark, model), ax in panels.items():
        rows = ax_.pair_rows(data.table, benchmark, model, specs, first=True)
        ax.barh(y, ax_.value(rows, key, scale).fillna(0.0), color=[style.policy_color(p) for p in specs], height=0.65)
        ax_.right_of_rows(ax, y, ax_.counts(rows[count]))
        ax.set_xlim(0, top * 1.08)
        ax_.policy_rows(ax, y, specs)
    ax_.hide_inner_labels(panels)
    fig.supxlabel(xlabel, fontsize=7)
    ax_.legend_top(fig, ax_.policy_handles(specs), ncol=min(len(specs), 5), title=title)
    return notes.finish(fig, data.said())


def plot_summary_share(data: Prepared, name: str = "quoted_summary_share"):
    title = _title(data, name, "summary calls' share of the agent's time, shared solved tasks")
    xlabel = "summary-call time / agent time, task means over shared solved tasks (%); right: n tasks"
    return _bars(data, name, title, "summary_share", 100.0, xlabel, "shared_solved_tasks")


def plot_compressions(data: Prepared, name: str = "quoted_compressions"):
    title = _title(data, name, "compressions per run on tasks FC and the policy both solve")
    xlabel = "compressions per successful run; right of each panel: n shared solved tasks"
    return _bars(data, name, title, "compressions_per_run", 1.0, xlabel, "shared_solved_tasks")


SETTING_LINES = {"tight": ":", "primary": "-", "loose": "--"}


def plot_peaks(data: Prepared, name: str = "peak_context"):
    title = f"{style.figure_name(name)}: FC runs' peak prompt tokens, thresholds marked"
    combos = ax_.combos_with_data(data, data.meta.get("combos") or [])
    if not combos:
        return notes.note_figure(title, data.notes)
    marks = data.extra.get("thresholds", pd.DataFrame())
    models = len({m for _, m in combos})
    fig, panels = ax_.pair_facets(combos, panel_height=1.8, width=min(style.FULL_WIDTH, 2.4 * models + 0.9))
    for (benchmark, model), ax in panels.items():
        rows = data.table[(data.table["benchmark"] == benchmark) & (data.table["model"] == model)]
        peaks = rows["peak_prompt_tokens"].astype(float).to_numpy() / 1000
        ax.hist(peaks, bins=min(20, max(3, len(peaks))), color="#9ecae1", edgecolor="#3182bd", linewidth=0.5)
        own = marks[(marks["benchmark"] == benchmark) & (marks["model"] == model)] if len(marks) else marks
        for setting, line in SETTING_LINES.items():
            column = f"threshold_{setting}"
            if len(own) and pd.notna(own[column].iloc[0]):
                ax.axvline(float(own[column].iloc[0]) / 1000, color="#d62728", linestyle=line, linewidth=0.9)
        ax.grid(axis="x", visible=False)
    ax_.hide_inner_labels(panels, left=False)
    fig.supxlabel("peak prompt tokens per FC run (thousands)", fontsize=7)
    handles = [
        Line2D([], [], color="#d62728", linestyle=line, label=style.threshold_label(setting))
        for setting, line in SETTING_LINES.items()
    ]
    ax_.legend_top(fig, handles, ncol=3, title=title)
    return notes.finish(fig, data.said())


VIEWS = {
    "quoted_calls": (compute_calls, plot_calls),
    "quoted_summary_share": (compute_summary_share, plot_summary_share),
    "quoted_shared_tokens": (compute_shared_tokens, plot_shared_tokens),
    "quoted_compressions": (compute_compressions, plot_compressions),
    "peak_context": (compute_peaks, plot_peaks),
}


def compute(view: str, runs: pd.DataFrame, study: Study, *, n_boot: int, seed: int, pairs=None):
    """The notebook's entry: one of ``VIEWS`` (the catalog's ``view`` parameter)."""
    if view not in VIEWS:
        raise ValueError(f"view {view!r} unknown; allowed: {', '.join(VIEWS)}")
    return VIEWS[view][0](runs, study, n_boot=n_boot, seed=seed, pairs=pairs)


def plot(view: str, data: Prepared, name: str):
    return VIEWS[view][1](data, name)
