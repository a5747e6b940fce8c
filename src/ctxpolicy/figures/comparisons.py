"""Calls into ``ctxpolicy.metrics`` per (benchmark, model) of a grid block.

Figures never compute statistics themselves: each function here selects the runs a
figure is about and hands them to the metrics room, then labels the result with the
benchmark and model. A (benchmark, model) without runs becomes a note, not an error.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from ctxpolicy.figures import inputs, notes, style
from ctxpolicy.figures.prepared import Prepared
from ctxpolicy.metrics.compare import compare_to_baseline
from ctxpolicy.metrics.cost import DEFAULT_METHOD
from ctxpolicy.threshold_settings import PRIMARY

IDENTITY = ("benchmark", "model", "policy", "setting", "summarizer", "cell", "primitive", "trigger", "depth")


def cost_method(config: Mapping[str, Any]) -> str:
    """The headline billed-cost method (``metrics.cost_method``: estimated, exact or measured)."""
    return str(((config.get("metrics") or {}).get("cost_method")) or DEFAULT_METHOD)


def planned_attempts(config: Mapping[str, Any]) -> int:
    return max(1, int(config.get("attempts") or 1))


def compare_against_fc(
    runs: pd.DataFrame, *, model: str, benchmark: str, n_boot: int, seed: int, attempts: int, cost_method: str
) -> pd.DataFrame:
    """One row per non-FC cell under ``ctxpolicy compare``'s keys: the one comparison that
    `ctxpolicy compare` prints too, so a number in a figure and the same number there are equal."""
    return compare_to_baseline(
        runs, model=model, benchmark=benchmark, attempts=attempts, cost_method=cost_method, n_boot=n_boot, seed=seed
    )


def cost_label(method: str) -> str:
    """Axis label of a billed-cost ratio, naming the cost method."""
    return f"billed input cost / FC ({method})"


def resource_gaps(own: pd.DataFrame, table: pd.DataFrame, model: str, benchmark: str) -> list[str]:
    """Why resource ratios are missing for a (benchmark, model): no eligible FC run at all, or
    the policies whose ratios came out undefined."""
    from ctxpolicy.metrics.compare import resource_eligible
    from ctxpolicy.metrics.outcomes import time_limited

    if table.empty or "tokens_ratio_est" not in table:
        return []
    fc = own[own["policy"].astype(str) == style.FC]
    if len(fc) and resource_eligible(fc).empty:
        timed_out = bool(time_limited(fc).all())
        return [notes.why_no_eligible_fc(model, benchmark, all_time_limited=timed_out)]
    undefined = table.loc[table["tokens_ratio_est"].isna(), "policy"].astype(str)
    return [notes.why_ratios_undefined(style.order_policies(undefined), model, benchmark)] if len(undefined) else []


def pair_combos(
    config: Mapping[str, Any], block_name: str, pairs: list[tuple[str, str]] | None
) -> tuple[list[tuple[str, str]], list[str]]:
    """The (benchmark, model) combos of a grid block that a figure draws: all of them in config
    order (``pairs`` None), or the given (model, benchmark) pairs in the order given, with a note
    for each pair the block does not have (``inputs.parse_pairs`` reads the notebook parameter)."""
    combos = inputs.combos(config, block_name)
    if pairs is None:
        return combos, []
    chosen, said = [], []
    for model, benchmark in pairs:
        if (benchmark, model) in combos:
            chosen.append((benchmark, model))
        else:
            said.append(f"{model}/{benchmark} is not a pair of the config's grid.{block_name} block.")
    return chosen, said


def policies_of(config: Mapping[str, Any], block_name: str) -> list[str]:
    """The policy specs of a grid block's cells (``ctxpolicy.grid`` is the authority), FC left out."""
    from ctxpolicy.grid import TRACK_NAMES, expand_grid

    track = TRACK_NAMES.get(block_name, block_name)
    return style.order_policies(
        c.policy for c in expand_grid(dict(config)) if c.track == track and c.policy != style.FC
    )


def cohort_tasks(config: Mapping[str, Any], benchmark: str, cohort: str | None) -> set[str] | None:
    """Task ids the study plans for a cohort (``ctxpolicy.grid.cohort_tasks``: the file, cut by
    ``cohort_limit``), or None when the config names no such cohort. A cohort file that is named
    but missing or unreadable is an error (``ConfigError`` naming it), never "every task"."""
    from ctxpolicy.grid import cohort_tasks as planned

    cohorts = ((config.get("benchmarks") or {}).get(benchmark) or {}).get("cohorts") or {}
    if not cohort or cohort not in cohorts:
        return None
    return set(planned(dict(config), benchmark, cohort))


def restrict_tasks(runs: pd.DataFrame, tasks: set[str] | None) -> pd.DataFrame:
    return runs if tasks is None else runs[runs["task_id"].astype(str).isin(tasks)]


def runs_of(
    runs: pd.DataFrame, config: Mapping[str, Any], benchmark: str, model: str, cohort: str | None = None
) -> pd.DataFrame:
    """One (benchmark, model)'s runs, restricted to a cohort's tasks when the config names the
    cohort (sweep figures use the sweep subset, which the main cohort's runs also cover)."""
    own = inputs.select(runs, benchmark=benchmark, model=model)
    return restrict_tasks(own, cohort_tasks(config, benchmark, cohort))


def compare_full_comparison(
    runs: pd.DataFrame,
    config: Mapping[str, Any],
    *,
    n_boot: int,
    seed: int,
    metric=None,
    pairs: list[tuple[str, str]] | None = None,
    combos: list[tuple[str, str]] | None = None,
) -> Prepared:
    """``compare_block`` over the full comparison, at its threshold setting, for its policies;
    ``pairs`` (model, benchmark) restricts it to some pairs (None: all), ``combos`` (benchmark,
    model) gives the pairs' order when a figure has already chosen them (``pair_combos``)."""
    block = inputs.block(config, "full_comparison")
    if combos is None:
        combos = pair_combos(config, "full_comparison", pairs)[0]
    data = compare_block(
        inputs.select_pairs(runs, pairs),
        config,
        "full_comparison",
        n_boot=n_boot,
        seed=seed,
        combos=combos,
        setting=block.get("setting", PRIMARY),
        policies=policies_of(config, "full_comparison"),
        metric=metric,
    )
    data.meta["setting"] = block.get("setting", PRIMARY)
    return data


def compare_block(
    runs: pd.DataFrame,
    config: Mapping[str, Any],
    block_name: str,
    *,
    n_boot: int,
    seed: int,
    combos: list[tuple[str, str]] | None = None,
    setting: str | None = None,
    cohort: str | None = None,
    policies: list[str] | None = None,
    own_summarizer: bool = True,
    metric=None,
) -> Prepared:
    """``compare_to_fc`` (or another ``ctxpolicy.metrics.compare`` function with the same
    signature, ``metric``) for each (benchmark, model) of a block, one row per cell.
    ``own_summarizer`` keeps only cells where the agent summarizes for itself."""
    method = cost_method(config)
    metric = metric or compare_against_fc
    combos = combos if combos is not None else inputs.combos(config, block_name)
    frames, said = [], []
    if not combos:
        said.append(f"the config has no grid.{block_name} block with models and benchmarks.")
    for benchmark, model in combos:
        own = runs_of(runs, config, benchmark, model, cohort)
        if own.empty:
            said.append(notes.why_no_runs(model, benchmark))
            continue
        if not (own["policy"].astype(str) == style.FC).any():
            said.append(notes.why_no_fc(model, benchmark))
            continue
        table = metric(
            own,
            model=model,
            benchmark=benchmark,
            n_boot=n_boot,
            seed=seed,
            attempts=planned_attempts(config),
            cost_method=method,
        )
        if table.empty:
            said.append(f"no compressed-policy runs for {model} on {benchmark}.")
            continue
        table = table[table["policy"].astype(str) != style.FC]
        if own_summarizer and "summarizer" in table:
            table = table[table["summarizer"].isna()]
        if policies is not None:
            table = table[table["policy"].astype(str).isin(policies)]
        if setting is not None:
            table = table[inputs.setting_matches(table["setting"], setting)]
        if table.empty:
            said.append(f"no compressed-policy runs for {model} on {benchmark}.")
            continue
        said += resource_gaps(own, table, model, benchmark)
        frames.append(table.assign(benchmark=benchmark, model=model))
    out = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    return Prepared(out, said, {"combos": combos, "cost_method": method})
