"""Calls into ``ctxpolicy.metrics`` per (benchmark, model) of a grid block.

Figures never compute statistics themselves: each function here selects the runs a
figure is about and hands them to the metrics room, then labels the result with the
benchmark and model. A (benchmark, model) without runs becomes a note, not an error.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from ctxpolicy.figures import inputs, style
from ctxpolicy.figures.prepared import Prepared
from ctxpolicy.figures.tables import read_cohort


def policies_of(config: Mapping[str, Any], block_name: str) -> list[str]:
    """The policy specs of a grid block's cells (``ctxpolicy.grid`` is the authority), FC left out."""
    from ctxpolicy.grid import TRACK_NAMES, expand_grid

    track = TRACK_NAMES.get(block_name, block_name)
    return style.order_policies(c.policy for c in expand_grid(dict(config))
                                if c.track == track and c.policy != style.FC)


def cohort_tasks(config: Mapping[str, Any], benchmark: str, cohort: str | None) -> set[str] | None:
    """Task ids of a cohort file, or None when the config names none or it cannot be read."""
    if not cohort:
        return None
    try:
        return set(read_cohort(config["benchmarks"][benchmark]["cohorts"][cohort]))
    except (KeyError, OSError, TypeError):
        return None


def restrict_tasks(runs: pd.DataFrame, tasks: set[str] | None) -> pd.DataFrame:
    return runs if tasks is None else runs[runs["task_id"].astype(str).isin(tasks)]


def runs_of(runs: pd.DataFrame, config: Mapping[str, Any], benchmark: str, model: str,
            cohort: str | None = None) -> pd.DataFrame:
    """One (benchmark, model)'s runs, restricted to a cohort's tasks when its file is readable
    (sweep figures use the sweep subset, which the main cohort's runs also cover)."""
    own = inputs.select(runs, benchmark=benchmark, model=model)
    return restrict_tasks(own, cohort_tasks(config, benchmark, cohort))


def compare_full_comparison(runs: pd.DataFrame, config: Mapping[str, Any], *, n_boot: int, seed: int,
                            metric=None) -> Prepared:
    """``compare_block`` over the full comparison, at its threshold setting, for its policies."""
    block = inputs.block(config, "full_comparison")
    return compare_block(runs, config, "full_comparison", n_boot=n_boot, seed=seed,
                         setting=block.get("setting", "primary"),
                         policies=policies_of(config, "full_comparison"), metric=metric)


def compare_block(runs: pd.DataFrame, config: Mapping[str, Any], block_name: str, *,
                  n_boot: int, seed: int, combos: list[tuple[str, str]] | None = None,
                  setting: str | None = None, cohort: str | None = None,
                  policies: list[str] | None = None, own_summarizer: bool = True,
                  metric=None) -> Prepared:
    """``compare_to_fc`` (or another ``ctxpolicy.metrics.compare`` function with the same
    signature, ``metric``) for each (benchmark, model) of a block, one row per cell.
    ``own_summarizer`` keeps only cells where the agent summarizes for itself."""
    from ctxpolicy.metrics.compare import compare_to_fc

    metric = metric or compare_to_fc
    combos = combos if combos is not None else inputs.combos(config, block_name)
    frames, notes = [], []
    if not combos:
        notes.append(f"the config has no grid.{block_name} block with models and benchmarks.")
    for benchmark, model in combos:
        own = runs_of(runs, config, benchmark, model, cohort)
        if own.empty:
            notes.append(f"no runs for {model} on {benchmark}.")
            continue
        if not (own["policy"].astype(str) == style.FC).any():
            notes.append(f"no FC runs for {model} on {benchmark}: nothing to compare against.")
            continue
        table = metric(own, model=model, benchmark=benchmark, n_boot=n_boot, seed=seed)
        if table.empty:
            notes.append(f"no compressed-policy runs for {model} on {benchmark}.")
            continue
        table = table[table["policy"].astype(str) != style.FC]
        if own_summarizer and "summarizer" in table:
            table = table[table["summarizer"].isna()]
        if policies is not None:
            table = table[table["policy"].astype(str).isin(policies)]
        if setting is not None:
            table = table[inputs.setting_matches(table["setting"], setting)]
        if table.empty:
            notes.append(f"no compressed-policy runs for {model} on {benchmark}.")
            continue
        frames.append(table.assign(benchmark=benchmark, model=model))
    out = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    return Prepared(out, notes, {"combos": combos})
