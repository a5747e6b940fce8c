"""Calls into ``ctxpolicy.metrics`` per (benchmark, model) of a grid block.

Figures never compute statistics themselves: each function here selects the runs a
figure is about and hands them to the metrics room, then labels the result with the
benchmark and model. A (benchmark, model) without runs becomes a note, not an error.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

import pandas as pd

from ctxpolicy.figures import inputs, notes, style
from ctxpolicy.figures.prepared import Prepared


DEFAULT_COST_METHOD = "estimated"
# compare_to_fc's ratio columns -> the keys the figures' data files and `ctxpolicy compare` use;
# each becomes {key}_est, {key}_lo, {key}_hi and {key}_n_tasks
RATIO_KEYS = {"token_ratio": "tokens_ratio", "latency_ratio": "latency_ratio",
              "cost_ratio": "cost_ratio_exact", "cost_ratio_est": "cost_ratio_estimated",
              "cost_ratio_measured": "cost_ratio_measured", "calls_ratio": "calls_ratio",
              "retrieval_ratio": "retrieval_ratio", "execution_ratio": "execution_ratio"}
IDENTITY = ("benchmark", "model", "policy", "setting", "summarizer", "cell", "primitive", "trigger", "depth")


def cost_method(config: Mapping[str, Any]) -> str:
    """The headline billed-cost method (``metrics.cost_method``: estimated, exact or measured)."""
    return str(((config.get("metrics") or {}).get("cost_method")) or DEFAULT_COST_METHOD)


def planned_attempts(config: Mapping[str, Any]) -> int:
    return max(1, int(config.get("attempts") or 1))


def solved_min(attempts: int) -> int:
    """The study's "solved": at least two thirds of the attempts succeed, ⌈2/3·attempts⌉."""
    return -(-2 * attempts // 3)


def call_metric(metric, runs: pd.DataFrame, **kwargs) -> pd.DataFrame:
    """Call a ``ctxpolicy.metrics.compare`` function with the keyword arguments it accepts
    (``attempts`` and ``cost_method`` only where its version takes them)."""
    accepted = inspect.signature(metric).parameters
    if not any(p.kind == p.VAR_KEYWORD for p in accepted.values()):
        kwargs = {k: v for k, v in kwargs.items() if k in accepted}
    return metric(runs, **kwargs)


def compare_keys(table: pd.DataFrame, method: str = DEFAULT_COST_METHOD) -> pd.DataFrame:
    """``compare_to_fc`` rows under the names ``ctxpolicy compare`` prints: ``resolve_rate``,
    ``baseline_resolve_rate``, ``resolve_delta_{est,lo,hi}`` (fractions), and for each ratio
    ``{key}_{est,lo,hi,n_tasks}``; ``cost_ratio_*`` is the ``method``'s cost ratio."""
    if table.empty:
        return table
    out = pd.DataFrame({c: table[c] for c in IDENTITY if c in table})
    out["n_tasks"] = table["n_tasks"]
    out["resolve_rate"] = table["resolve_rate"].astype(float)
    out["baseline_resolve_rate"] = table.get("baseline_resolve_rate", table.get("fc_resolve_rate")).astype(float)
    for suffix in ("", "_lo", "_hi"):
        out[f"resolve_delta_{'est' if not suffix else suffix[1:]}"] = table[f"delta_pp{suffix}"].astype(float) / 100
    n_resource = table.get("n_resource_tasks", table["n_tasks"])
    for source, key in RATIO_KEYS.items():
        if source not in table:
            continue
        out[f"{key}_est"] = table[source].astype(float)
        out[f"{key}_lo"] = table[f"{source}_lo"].astype(float)
        out[f"{key}_hi"] = table[f"{source}_hi"].astype(float)
        n = table.get(f"{source}_n_tasks", table["n_measured_tasks"] if source == "cost_ratio_measured"
                      and "n_measured_tasks" in table else n_resource)
        out[f"{key}_n_tasks"] = n
    chosen = f"cost_ratio_{method}"
    for part in ("est", "lo", "hi", "n_tasks"):
        if f"{chosen}_{part}" in out:
            out[f"cost_ratio_{part}"] = out[f"{chosen}_{part}"]
    out["cost_ratio_method"] = method
    return out


def compare_against_fc(runs: pd.DataFrame, *, model: str, benchmark: str, n_boot: int, seed: int,
                       attempts: int, cost_method: str) -> pd.DataFrame:
    """One row per non-FC cell under ``ctxpolicy compare``'s keys: the metrics room's
    ``compare_to_baseline`` where it exists (it already speaks those keys), else
    ``compare_to_fc`` renamed by ``compare_keys``. (After the metrics work lands only the
    first branch is needed.)"""
    from ctxpolicy.metrics import compare

    if hasattr(compare, "compare_to_baseline"):
        return compare.compare_to_baseline(runs, model=model, benchmark=benchmark, attempts=attempts,
                                           cost_method=cost_method, n_boot=n_boot, seed=seed)
    return compare_keys(call_metric(compare.compare_to_fc, runs, model=model, benchmark=benchmark,
                                    n_boot=n_boot, seed=seed, attempts=attempts, cost_method=cost_method),
                        cost_method)


def cost_label(method: str) -> str:
    """Axis label of a billed-cost ratio, naming the cost method."""
    return f"billed input cost / FC ({method})"


def resource_gaps(own: pd.DataFrame, table: pd.DataFrame, model: str, benchmark: str) -> list[str]:
    """Why resource ratios are missing for a (benchmark, model): no eligible FC run at all, or
    the policies whose ratios came out undefined."""
    from ctxpolicy.metrics.compare import resource_eligible

    if table.empty or "tokens_ratio_est" not in table:
        return []
    fc = own[own["policy"].astype(str) == style.FC]
    if len(fc) and resource_eligible(fc).empty:
        timed_out = bool((fc["outcome"].astype(str) == "time_limit").all())
        return [notes.why_no_eligible_fc(model, benchmark, all_time_limited=timed_out)]
    undefined = table.loc[table["tokens_ratio_est"].isna(), "policy"].astype(str)
    return [notes.why_ratios_undefined(style.order_policies(undefined), model, benchmark)] if len(undefined) else []


def policies_of(config: Mapping[str, Any], block_name: str) -> list[str]:
    """The policy specs of a grid block's cells (``ctxpolicy.grid`` is the authority), FC left out."""
    from ctxpolicy.grid import TRACK_NAMES, expand_grid

    track = TRACK_NAMES.get(block_name, block_name)
    return style.order_policies(c.policy for c in expand_grid(dict(config))
                                if c.track == track and c.policy != style.FC)


def cohort_tasks(config: Mapping[str, Any], benchmark: str, cohort: str | None) -> set[str] | None:
    """Task ids the study plans for a cohort (``ctxpolicy.grid.cohort_tasks``: the file, cut by
    ``cohort_limit``), or None when the config names none or it cannot be read."""
    from ctxpolicy.config import ConfigError
    from ctxpolicy.grid import cohort_tasks as planned

    if not cohort:
        return None
    try:
        return set(planned(dict(config), benchmark, cohort))
    except (KeyError, OSError, TypeError, ConfigError):
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
        table = metric(own, model=model, benchmark=benchmark, n_boot=n_boot, seed=seed,
                       attempts=planned_attempts(config), cost_method=method)
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
