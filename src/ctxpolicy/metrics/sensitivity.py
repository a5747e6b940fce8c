"""How a policy's billed input relative to FC moves with the cache (pure).

Per policy cell against the baseline (FC), on compare's rules (``metrics.compare``: the study's
runs, resource-eligible runs, a task counted on both sides or on neither, the same task
bootstrap, so a ratio here equals ``compare_to_baseline``'s of the same name), or on a replay
table (``replays``: ``ctxpolicy replay``'s runs, track ``replay``, e.g. an imported corpus's), where
FC is the FC replay and each replayed configuration a cell, on the same rules (so a ratio equals
``figures.imported_replay``'s of the same method):

- ``cost_ratio_{method}``: the billed-input ratio under every method of the cost-method
  registry (``metrics.cost_methods``), at the runs table's discount; NaN where the runs lack
  what a method needs (no server-reported cached tokens: no ``measured``; no source run with
  provider cached tokens: no ``measured-profile``);
- ``cost_ratio_at_{d}``: the ratio under ``cost_method`` (the study's, ``metrics.cost_method``)
  at each cache-read discount of ``DISCOUNTS`` (1 = no cache: every prompt token at full price);
- ``break_even_{method}``: the discount at which the policy's bill equals FC's (``break_even``).

A run's bill is linear in the discount d: C(d) = F + d·N_cached, F = N_fresh + w·N_written +
N_summary (``metrics.cost.billed``), so a ratio of task means is (F_p + d·C_p) / (F_fc + d·C_fc)
with F and C the parts' means over the shared tasks.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ctxpolicy.metrics import cost_methods
from ctxpolicy.metrics.bootstrap import DEFAULT_RESAMPLES, resample_counts
from ctxpolicy.metrics.compare import (
    FC,
    baseline_runs,
    cell_description,
    comparison_tasks,
    policy_cells,
    ratio_with_interval,
    select,
    task_resource_means_of,
)
from ctxpolicy.metrics.cost_methods import DEFAULT as DEFAULT_METHOD
from ctxpolicy.metrics.cost_methods.base import CostMethod
from ctxpolicy.metrics.decomposition import replay_runs

DISCOUNTS = (0.1, 0.25, 0.5, 1.0)  # cache-read prices in fresh-token units; 1.0: no cache


def discount_ratio(discount: float) -> str:
    """The name of the ratio at one discount: ``cost_ratio_at_0.25``."""
    return f"cost_ratio_at_{discount:g}"


def break_even(fixed_policy: float, cached_policy: float, fixed_base: float, cached_base: float) -> float:
    """The discount d in [0, 1] at which F_p + d·C_p = F_b + d·C_b: where the policy's bill
    crosses the baseline's (cheaper on one side of d, dearer on the other). NaN where the two
    never cross in [0, 1], or are equal at every d."""
    values = (fixed_policy, cached_policy, fixed_base, cached_base)
    if any(math.isnan(v) for v in values):
        return math.nan
    slope = cached_policy - cached_base
    if slope == 0:
        return math.nan
    d = (fixed_base - fixed_policy) / slope
    return float(d) if 0.0 <= d <= 1.0 else math.nan


def _parts(runs: pd.DataFrame, method: CostMethod) -> tuple[pd.Series, pd.Series]:
    """Each run's bill split into the part that does not depend on the discount (F) and its
    cached tokens (C): C(d) = F + d·C."""

    def column(name: str) -> pd.Series:
        if name not in runs:
            return pd.Series(np.nan, index=runs.index)
        return pd.to_numeric(runs[name].astype("object"), errors="coerce").astype(float)

    written = column(method.written_column) * method.write_premium if method.writes else 0.0
    fixed = column(method.fresh_column) + written + column("summary_input")
    return fixed, column(method.cached_column)


def with_parts(runs: pd.DataFrame, cost_method: str) -> pd.DataFrame:
    """``runs`` with every method's parts (``fixed_{key}``, ``part_cached_{key}``) and the
    ``cost_method``'s bill at each discount (``billed_at_{d}``)."""
    columns = {}
    for method in cost_methods.methods():
        fixed, cached = _parts(runs, method)
        columns[f"fixed_{method.key}"], columns[f"part_cached_{method.key}"] = fixed, cached
        if method.billed_column not in runs:  # a table from before the method existed
            columns[method.billed_column] = pd.Series(np.nan, index=runs.index)
    study = cost_methods.method(cost_method)
    fixed, cached = columns[f"fixed_{study.key}"], columns[f"part_cached_{study.key}"]
    for d in DISCOUNTS:
        columns[f"billed_at_{d:g}"] = fixed + d * cached
    return runs.assign(**columns)


def _mean_columns(ratios: dict[str, str]) -> list[str]:
    """The columns whose per-task means a cell's row reads: each ratio's (every method's billed
    column among them) and each method's parts."""
    parts = [f"{part}_{m.key}" for m in cost_methods.methods() for part in ("fixed", "part_cached")]
    return list(dict.fromkeys([*ratios.values(), *parts]))


def _break_even_of(
    group: dict[str, pd.Series], base: dict[str, pd.Series], tasks: pd.Index, method: CostMethod
) -> float:
    """``break_even`` of the parts' means over the tasks both sides priced under ``method``;
    ``group`` and ``base`` are the two sides' ``compare.task_resource_means_of``."""
    billed = method.billed_column
    shared = tasks.intersection(group[billed].index)
    shared = shared.intersection(base[billed].index)
    if not len(shared):
        return math.nan

    def mean(means: dict[str, pd.Series], part: str) -> float:
        return float(means[f"{part}_{method.key}"].reindex(shared).mean())

    return break_even(mean(group, "fixed"), mean(group, "part_cached"), mean(base, "fixed"), mean(base, "part_cached"))


def pair_runs(runs: pd.DataFrame, *, model: str, benchmark: str, replays: bool = False) -> pd.DataFrame:
    """The runs of one model and benchmark: the study's (``compare.select``), or the replays
    (``decomposition.replay_runs``) where ``replays``."""
    if not replays:
        return select(runs, model=model, benchmark=benchmark)
    own = replay_runs(runs)
    mask = (own["model"].astype("object") == model) & (own["benchmark"].astype("object") == benchmark)
    return own[mask.to_numpy()]


def cost_sensitivity(
    runs: pd.DataFrame,
    *,
    model: str,
    benchmark: str,
    baseline: str = FC,
    baseline_setting: str | None = None,
    cost_method: str = DEFAULT_METHOD,
    track: str | None = None,
    n_boot: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    attempts: int | None = None,  # the comparisons' signature; the ratios do not depend on it
    replays: bool = False,
) -> pd.DataFrame:
    """One row per cell other than the baseline's (only ``track``'s cells when given), on one
    model and benchmark: the cell's identity, ``n_tasks``, ``cost_ratio_method``, then each
    ratio of the module docstring as ``{name}_est/_lo/_hi/_n_tasks`` and the break-evens.
    ``replays``: ``runs`` is a replay table and the baseline its replay. ValueError without
    baseline runs."""
    cost_methods.method(cost_method)
    selected = with_parts(pair_runs(runs, model=model, benchmark=benchmark, replays=replays), cost_method)
    base = baseline_runs(selected, baseline, baseline_setting)
    if base.empty:
        which = f"{baseline} replays" if replays else f"{baseline} runs"
        raise ValueError(f"no {which} for model {model!r} on benchmark {benchmark!r}")
    ratios = {f"cost_ratio_{m.name}": m.billed_column for m in cost_methods.methods()}
    ratios.update({discount_ratio(d): f"billed_at_{d:g}" for d in DISCOUNTS})
    columns = _mean_columns(ratios)  # each cell's runs grouped once for all of them
    base_means = task_resource_means_of(base, columns)
    rows = []
    for cell, group in policy_cells(selected, exclude=base):
        if track is not None and "track" in group and (group["track"].astype("object") != track).all():
            continue
        tasks = comparison_tasks(group, base)
        counts = resample_counts(len(tasks), n_boot, seed)
        row = {
            "benchmark": benchmark,
            "model": model,
            **cell_description(group),
            "cell": cell,
            "track": group["track"].iloc[0] if "track" in group else None,
            "baseline": baseline,
            "n_tasks": len(tasks),
            "cost_ratio_method": cost_method,
        }
        means = task_resource_means_of(group, columns)
        for name, column in ratios.items():
            values = ratio_with_interval(tasks, means[column], base_means[column], counts)
            row.update({f"{name}_{part}": value for part, value in values.items()})
        for method in cost_methods.methods():
            row[f"break_even_{method.name}"] = _break_even_of(means, base_means, tasks, method)
        rows.append(row)
    return pd.DataFrame(rows)
